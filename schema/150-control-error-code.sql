-- 150-control-error-code: the collector's error answer to a control request carries a typed
-- code (core/control.py, core/errors.py ErrorKind) in its own column, beside the message:
-- callers tell errors apart by the code, never by the text. An error answer has both, any
-- other row neither. Error answers written before this version are not kept apart by kind:
-- they become 'conflict' (what the API answered them with, a 409 quoting the collector).

ALTER TABLE _measure.control_request
    ADD COLUMN error_code text
        CONSTRAINT control_request_error_code_check
        CHECK (error_code IN ('not_found', 'invalid', 'conflict', 'unavailable'));
UPDATE _measure.control_request SET error_code = 'conflict' WHERE error IS NOT NULL;
ALTER TABLE _measure.control_request
    ADD CONSTRAINT control_request_error_has_code CHECK ((error IS NULL) = (error_code IS NULL));
