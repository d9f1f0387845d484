-- 140-tier-catalogue: which entity types have tiers, and the items of their upper tiers, come
-- from the catalogue (schema/catalog/entities.csv, column tier_order, and tier_items.csv),
-- loaded by the schema runner on every run like the entity types and counters.
--
--   _measure.tier_entity  the entity types with hour, shift, month and year tiers, in the
--                         order they are listed everywhere (_measure.tiered_entities(), 010-
--                         interface.sql; the API's enums, the dashboards' alert rules …).
--   _measure.tier_item    the items their shift, month and year tiers keep (measure.tier_item,
--                         020-tiers.sql), in the order of the tier views' columns.
--
-- A threshold's entity was checked against a list of six names written into the table
-- (010-tiers.sql); it now references _measure.tier_entity, so it follows the catalogue. The
-- foreign key is NOT VALID here because the catalogue is loaded after the versioned files (on
-- a new database, the default thresholds of 010 name types not loaded yet); every row written
-- is checked from now on, and the runner validates the existing rows once the catalogue is
-- loaded (core/schema.py, load_catalog_rows).

CREATE TABLE _measure.tier_entity (
    entity      text PRIMARY KEY REFERENCES _measure.entity_type (entity) ON UPDATE CASCADE,
    tier_order  smallint NOT NULL CHECK (tier_order >= 1),
    UNIQUE (tier_order) DEFERRABLE INITIALLY DEFERRED
);
GRANT SELECT ON _measure.tier_entity TO measure_writer;

CREATE TABLE _measure.tier_item (
    entity    text NOT NULL REFERENCES _measure.tier_entity (entity) ON UPDATE CASCADE,
    item      text NOT NULL CHECK (item ~ '^[a-z][a-z0-9_]*$'),
    enform    text NOT NULL CHECK (enform <> ''),
    unit      text NOT NULL,
    help      text NOT NULL CHECK (help <> ''),
    position  smallint NOT NULL CHECK (position >= 1),  -- 1-based, within the entity
    PRIMARY KEY (entity, item),
    UNIQUE (entity, position) DEFERRABLE INITIALLY DEFERRED
);
GRANT SELECT ON _measure.tier_item TO measure_writer;

-- Citus, a database distributed before this version: the catalogue is made of reference
-- tables, and so are these two now (005-distribute.citus.sql makes them so on a new database),
-- before the reference table _measure.threshold references one of them.
DO $citus$
BEGIN
    IF to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        IF EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = '_measure.entity_type'::regclass) THEN
            PERFORM create_reference_table('_measure.tier_entity');
            PERFORM create_reference_table('_measure.tier_item');
        END IF;
    END IF;
END
$citus$;

-- (in a DO block: Citus sends an ALTER TABLE of a reference table to the workers as its query
-- string, which here would be this whole file: "cannot insert multiple commands into a
-- prepared statement")
DO $threshold$
BEGIN
    ALTER TABLE _measure.threshold DROP CONSTRAINT threshold_entity_check;
    ALTER TABLE _measure.threshold ADD CONSTRAINT threshold_entity_fkey FOREIGN KEY (entity)
        REFERENCES _measure.tier_entity (entity) ON UPDATE CASCADE NOT VALID;
END
$threshold$;
