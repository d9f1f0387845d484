-- 020-structured: MEASCOM's structured files (SET REPORT FORMAT STRUCTURED).
--
-- In MEASURE, LIST/LISTALL with FORMAT STRUCTURED append one record per entity to an
-- entry-sequenced file named after the entity type, tagged with the report's LOADID
-- (measure-reference §5 D). Here all of them go into one table: type_code says which
-- "file", loadid tags the load (DT<jd><hh> in the 1986 article's Figure 4).
--
-- Entry-sequenced: structured_id gives the order of appends; duplicates are NOT removed
-- (listing an entity twice stores it twice, as in MEASURE). Values are raw (µs, counts),
-- whatever REPORT RATE says; counters[] follows _measure.counter_def.position.
-- A LIST writes one summary record per entity for the report window; LISTALL every interval
-- record in it. entity_id is NULL for a TOTALS record.
CREATE TABLE _measure.structured_record (
    structured_id   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    loadid          text CHECK (loadid IS NULL OR loadid ~ '^[A-Z0-9$#^_-]{1,8}$'),
    system_id       smallint NOT NULL REFERENCES _measure.system,
    type_code       smallint NOT NULL REFERENCES _measure.entity_type,
    measurement_id  integer NOT NULL,
    entity_id       bigint,
    from_at         timestamptz NOT NULL,
    to_at           timestamptz NOT NULL,
    delta_us        bigint NOT NULL CHECK (delta_us > 0),
    counters        bigint[] NOT NULL,
    written_at      timestamptz NOT NULL DEFAULT now(),
    CHECK (to_at > from_at)
);
CREATE INDEX structured_record_load_idx ON _measure.structured_record (system_id, loadid, type_code);
GRANT SELECT, INSERT, DELETE ON _measure.structured_record TO measure_writer;
