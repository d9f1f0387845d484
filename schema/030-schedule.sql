-- 030-schedule: scheduled reports, the successors of the 1986 nightly OBEY files that ran
-- the ENFORM reductions and reports (docs/enform-reports.md §0, Figures 1, 2 and 9:
-- "Run these reports daily").
--
-- _measure.report_definition  what to run (a report of queries/), with which parameters
--                             (relative dates such as "yesterday", "last week", "last month"),
--                             when (a 5-field cron expression in the system's local time) and
--                             which renderings to keep (text, csv; the rows as JSON always).
-- _measure.report_run         one row per definition, system and schedule slot. The UNIQUE
--                             key is what makes a slot run once even with two schedulers:
--                             a scheduler claims a slot with INSERT ... ON CONFLICT DO NOTHING
--                             RETURNING, committed before the report runs
--                             (collector/scheduler.py).
--
-- A definition with system_id NULL applies to every system; its runs carry the system they
-- ran for. Readers use measure.report_definition and measure.report_run
-- (schema/idempotent/045-schedule.sql).

CREATE TABLE _measure.report_definition (
    definition_id  integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name           text NOT NULL UNIQUE CHECK (name ~ '^[a-z][a-z0-9-]{0,62}$'),
    report         text NOT NULL CHECK (report ~ '^[a-z][a-z0-9-]{0,62}$'),  -- queries/<report>.sql
    system_id      smallint REFERENCES _measure.system ON DELETE CASCADE,    -- NULL = every system
    parameters     jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(parameters) = 'object'),
    schedule       text NOT NULL
                   CHECK (array_length(regexp_split_to_array(btrim(schedule), '\s+'), 1) = 5),
    outputs        text[] NOT NULL DEFAULT '{text}'
                   CHECK (cardinality(outputs) >= 1 AND outputs <@ ARRAY['text', 'csv', 'json']),
    enabled        boolean NOT NULL DEFAULT true,
    description    text NOT NULL DEFAULT '',
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now()
);
GRANT SELECT, INSERT, UPDATE, DELETE ON _measure.report_definition TO measure_writer;

-- parameters: resolved against the slot in the system's time zone (dates, instants).
-- Outputs: output_json (the rows) always, output_text / output_csv when the definition
-- asks for them. error: NULL on success. attempt: how many times the slot was tried.
-- retry_after: a failed run is tried again once the scheduler's clock reaches it (the next
-- schedule slot after the failure); NULL = not to be retried (succeeded, or out of attempts).
CREATE TABLE _measure.report_run (
    run_id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    definition_id  integer NOT NULL REFERENCES _measure.report_definition ON DELETE CASCADE,
    system_id      smallint NOT NULL REFERENCES _measure.system ON DELETE CASCADE,
    slot_at        timestamptz NOT NULL,
    report         text NOT NULL,
    parameters     jsonb,
    instance       text NOT NULL,
    claimed_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    started_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    finished_at    timestamptz,
    rows           integer CHECK (rows >= 0),
    output_text    text,
    output_csv     text,
    output_json    text,
    error          text,
    attempt        smallint NOT NULL DEFAULT 1 CHECK (attempt >= 1),
    retry_after    timestamptz,
    UNIQUE (definition_id, system_id, slot_at),
    CHECK (finished_at IS NOT NULL OR error IS NULL)
);
CREATE INDEX report_run_system_slot_idx ON _measure.report_run (system_id, slot_at);
CREATE INDEX report_run_unfinished_idx ON _measure.report_run (started_at) WHERE finished_at IS NULL;
CREATE INDEX report_run_retry_idx ON _measure.report_run (retry_after) WHERE retry_after IS NOT NULL;
GRANT SELECT, INSERT, UPDATE, DELETE ON _measure.report_run TO measure_writer;

-- The 1986 routine (the nightly OBEY files and ENFORM runs), for every system.
INSERT INTO _measure.report_definition (name, report, parameters, schedule, outputs, description) VALUES
    ('daily-condensation-check', 'condensation-check', '{"day": "yesterday"}', '0 6 * * *',
     '{text,csv}', 'hours of yesterday whose tiers are missing or incomplete (before the threshold report trusts them)'),
    ('daily-threshold', 'threshold', '{"day": "yesterday", "shift": null}', '5 6 * * *',
     '{text,csv}', 'Figure 1/9: threshold report of yesterday, every shift'),
    ('weekly-shift-summary', 'shift-summary', '{"period": "last week"}', '15 6 * * 1',
     '{text,csv}', 'Figure 6: CPU shift tier of last week (Monday to Sunday)'),
    ('monthly-cpu-trend', 'cpu-trend', '{"period": "last month"}', '30 6 1 * *',
     '{text,csv}', 'Figure 2: CPU trend report of last month'),
    ('monthly-capacity-forecast', 'capacity-forecast', '{"period": "last 3 months", "capacity": 70}',
     '45 6 1 * *', '{text,csv}', 'Capacity Planning Concepts: trend of the peak-hour busy over the last 3 months');
