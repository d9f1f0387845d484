-- 110-calendar: the configuration that was SQL-only becomes data the platform validates
-- (issue 17; the functions are schema/idempotent/050-config.sql, the commands `measuredb
-- system | calendar | threshold`, the endpoints /admin/systems and /admin/thresholds).
--
--   _measure.calendar        calendar versions of a system: each applies to the shift days
--                            from effective_from until the next version's effective_from.
--                            Shift days before a system's first version keep the shifts of
--                            _measure.shift (the system's own rows, else the defaults: three
--                            8-hour shifts 00-08, 08-16, 16-24), every day, as before.
--                            holiday_shift: the shift number a holiday's hours belong to
--                            under this version (NULL: to no shift).
--   _measure.calendar_shift  the shifts of a version per ISO weekday (1 = Monday): a shift
--                            whose end is not after its begin crosses midnight and belongs to
--                            the day (and weekday) it began; end '24:00' is the end of the day.
--   _measure.holiday         a system's holidays: on such a shift day the hours of its shifts
--                            belong to the version's holiday shift, or to no shift.
--   _measure.system_cpu_type the CPU types of a system (cpu NULL: every CPU not listed), shown
--                            as CPU TYPE by the hour views and the CPU trend report.
--
-- _measure.threshold gains shift_no (NULL: every shift): a threshold of one shift replaces the
-- threshold of every shift on the same (entity, item, operator) for the hours of that shift.

CREATE TABLE _measure.calendar (
    calendar_id     integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    system_id       smallint NOT NULL REFERENCES _measure.system ON DELETE CASCADE,
    effective_from  date NOT NULL,
    holiday_shift   smallint CHECK (holiday_shift BETWEEN 1 AND 9),
    holiday_name    text NOT NULL DEFAULT 'holiday',
    created_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (system_id, effective_from)
);
GRANT SELECT, INSERT, UPDATE, DELETE ON _measure.calendar TO measure_writer;

CREATE TABLE _measure.calendar_shift (
    calendar_id  integer NOT NULL REFERENCES _measure.calendar ON DELETE CASCADE,
    weekday      smallint NOT NULL CHECK (weekday BETWEEN 1 AND 7),
    shift_no     smallint NOT NULL CHECK (shift_no BETWEEN 1 AND 9),
    begin_time   time NOT NULL CHECK (begin_time < time '24:00'),
    end_time     time NOT NULL,
    name         text NOT NULL DEFAULT '',
    PRIMARY KEY (calendar_id, weekday, shift_no),
    CHECK (extract(minute FROM begin_time) = 0 AND extract(second FROM begin_time) = 0),
    CHECK (extract(minute FROM end_time) = 0 AND extract(second FROM end_time) = 0)
);
GRANT SELECT, INSERT, UPDATE, DELETE ON _measure.calendar_shift TO measure_writer;

CREATE TABLE _measure.holiday (
    system_id  smallint NOT NULL REFERENCES _measure.system ON DELETE CASCADE,
    day        date NOT NULL,
    name       text NOT NULL DEFAULT '',
    PRIMARY KEY (system_id, day)
);
GRANT SELECT, INSERT, UPDATE, DELETE ON _measure.holiday TO measure_writer;

CREATE TABLE _measure.system_cpu_type (
    system_id  smallint NOT NULL REFERENCES _measure.system ON DELETE CASCADE,
    cpu        smallint CHECK (cpu BETWEEN 0 AND 15),
    cpu_type   text NOT NULL
);
CREATE UNIQUE INDEX system_cpu_type_key ON _measure.system_cpu_type (system_id, coalesce(cpu, -1));
GRANT SELECT, INSERT, UPDATE, DELETE ON _measure.system_cpu_type TO measure_writer;

ALTER TABLE _measure.threshold ADD COLUMN shift_no smallint CHECK (shift_no BETWEEN 1 AND 9);
DROP INDEX _measure.threshold_key;
CREATE UNIQUE INDEX threshold_key ON _measure.threshold
    (coalesce(system_id, -1), entity, item, operator, coalesce(shift_no, 0));
