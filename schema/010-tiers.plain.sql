-- 010-tiers, plain PostgreSQL branch: the hour tiers are tables, kept current by
-- _measure.condense (schema/idempotent/021-condense.plain.sql) from the hours that
-- _measure.note_intervals marked dirty. Columns and their order are exactly those of the
-- continuous aggregates of 010-tiers.timescale.sql, so every view reads both alike.
-- Sums are numeric (sum of bigint); *_min/*_max are interval values: busy % (100 x busy /
-- DELTA-TIME), average queue length (queue / DELTA-TIME) or per second.

CREATE TABLE _measure.cpu_hour (
    system_id       smallint NOT NULL,
    entity_id       bigint NOT NULL,
    measurement_id  integer NOT NULL,
    hour_at         timestamptz NOT NULL,
    cpu             smallint,
    samples         bigint NOT NULL,
    elapsed_us      numeric NOT NULL,
    first_from_at   timestamptz NOT NULL,
    last_to_at      timestamptz NOT NULL,
    busy_us              numeric,
    busy_min             numeric,
    busy_max             numeric,
    qlen_us              numeric,
    qlen_min             numeric,
    qlen_max             numeric,
    mqlen_us             numeric,
    mqlen_min            numeric,
    mqlen_max            numeric,
    swaps                numeric,
    swap_min             numeric,
    swap_max             numeric,
    ibusy_us             numeric,
    ibusy_min            numeric,
    ibusy_max            numeric,
    sbusy_us             numeric,
    sbusy_min            numeric,
    sbusy_max            numeric,
    dispatches           numeric,
    process_ovhd_us      numeric,
    disc_ios             numeric,
    cache_hits           numeric,
    transactions         numeric,
    response_us          numeric,
    PRIMARY KEY (system_id, entity_id, measurement_id, hour_at)
);
CREATE INDEX cpu_hour_system_hour_idx ON _measure.cpu_hour (system_id, hour_at);
GRANT SELECT, INSERT, DELETE ON _measure.cpu_hour TO measure_writer;

CREATE TABLE _measure.disc_hour (
    system_id       smallint NOT NULL,
    entity_id       bigint NOT NULL,
    measurement_id  integer NOT NULL,
    hour_at         timestamptz NOT NULL,
    cpu             smallint,
    samples         bigint NOT NULL,
    elapsed_us      numeric NOT NULL,
    first_from_at   timestamptz NOT NULL,
    last_to_at      timestamptz NOT NULL,
    busy_us              numeric,
    busy_min             numeric,
    busy_max             numeric,
    qlen_us              numeric,
    qlen_min             numeric,
    qlen_max             numeric,
    seek_busy_us         numeric,
    seek_busy_min        numeric,
    seek_busy_max        numeric,
    write_busy_us        numeric,
    write_busy_min       numeric,
    write_busy_max       numeric,
    requests             numeric,
    reads                numeric,
    writes               numeric,
    input_bytes          numeric,
    output_bytes         numeric,
    cache_hits           numeric,
    cache_misses         numeric,
    block_splits         numeric,
    PRIMARY KEY (system_id, entity_id, measurement_id, hour_at)
);
CREATE INDEX disc_hour_system_hour_idx ON _measure.disc_hour (system_id, hour_at);
GRANT SELECT, INSERT, DELETE ON _measure.disc_hour TO measure_writer;

CREATE TABLE _measure.line_hour (
    system_id       smallint NOT NULL,
    entity_id       bigint NOT NULL,
    measurement_id  integer NOT NULL,
    hour_at         timestamptz NOT NULL,
    cpu             smallint,
    samples         bigint NOT NULL,
    elapsed_us      numeric NOT NULL,
    first_from_at   timestamptz NOT NULL,
    last_to_at      timestamptz NOT NULL,
    read_busy_us         numeric,
    read_busy_min        numeric,
    read_busy_max        numeric,
    write_busy_us        numeric,
    write_busy_min       numeric,
    write_busy_max       numeric,
    requests             numeric,
    reads                numeric,
    writes               numeric,
    input_bytes          numeric,
    output_bytes         numeric,
    transactions         numeric,
    response_us          numeric,
    PRIMARY KEY (system_id, entity_id, measurement_id, hour_at)
);
CREATE INDEX line_hour_system_hour_idx ON _measure.line_hour (system_id, hour_at);
GRANT SELECT, INSERT, DELETE ON _measure.line_hour TO measure_writer;

CREATE TABLE _measure.process_hour (
    system_id       smallint NOT NULL,
    entity_id       bigint NOT NULL,
    measurement_id  integer NOT NULL,
    hour_at         timestamptz NOT NULL,
    cpu             smallint,
    samples         bigint NOT NULL,
    elapsed_us      numeric NOT NULL,
    first_from_at   timestamptz NOT NULL,
    last_to_at      timestamptz NOT NULL,
    busy_us              numeric,
    busy_min             numeric,
    busy_max             numeric,
    ready_us             numeric,
    pqlen_us             numeric,
    pqlen_min            numeric,
    pqlen_max            numeric,
    vsems                numeric,
    vsem_min             numeric,
    vsem_max             numeric,
    dispatches           numeric,
    page_faults          numeric,
    messages_sent        numeric,
    messages_received    numeric,
    PRIMARY KEY (system_id, entity_id, measurement_id, hour_at)
);
CREATE INDEX process_hour_system_hour_idx ON _measure.process_hour (system_id, hour_at);
GRANT SELECT, INSERT, DELETE ON _measure.process_hour TO measure_writer;

CREATE TABLE _measure.userdef_hour (
    system_id       smallint NOT NULL,
    entity_id       bigint NOT NULL,
    measurement_id  integer NOT NULL,
    hour_at         timestamptz NOT NULL,
    cpu             smallint,
    samples         bigint NOT NULL,
    elapsed_us      numeric NOT NULL,
    first_from_at   timestamptz NOT NULL,
    last_to_at      timestamptz NOT NULL,
    value_sum            numeric,
    value_min            numeric,
    value_max            numeric,
    PRIMARY KEY (system_id, entity_id, measurement_id, hour_at)
);
CREATE INDEX userdef_hour_system_hour_idx ON _measure.userdef_hour (system_id, hour_at);
GRANT SELECT, INSERT, DELETE ON _measure.userdef_hour TO measure_writer;

CREATE TABLE _measure.tmf_hour (
    system_id       smallint NOT NULL,
    entity_id       bigint NOT NULL,
    measurement_id  integer NOT NULL,
    hour_at         timestamptz NOT NULL,
    cpu             smallint,
    samples         bigint NOT NULL,
    elapsed_us      numeric NOT NULL,
    first_from_at   timestamptz NOT NULL,
    last_to_at      timestamptz NOT NULL,
    home_trans           numeric,
    trans_min            numeric,
    trans_max            numeric,
    home_trans_us        numeric,
    remote_trans         numeric,
    aborting_trans       numeric,
    PRIMARY KEY (system_id, entity_id, measurement_id, hour_at)
);
CREATE INDEX tmf_hour_system_hour_idx ON _measure.tmf_hour (system_id, hour_at);
GRANT SELECT, INSERT, DELETE ON _measure.tmf_hour TO measure_writer;
