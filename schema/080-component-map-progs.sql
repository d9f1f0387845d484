-- 080-component-map-progs: application servers installed under $PROGS, and the TMF monitor
-- (issue 3: the transaction-resource report of the simulated nodes).
--
-- The demo node's PATHWAY servers run $PROGS.SERVER1.ET1SRV, the program of Figure 3's OBEY
-- file ("ADD USERDEF $PROGS.SERVER1.*"), so the transaction-resource report must count
-- $PROGS programs as application servers, like $APPL ones (010-tiers.sql). Shops with
-- other conventions add their own rows to _measure.component_map.

INSERT INTO _measure.component_map (system_id, priority, match_on, pattern, component)
VALUES (NULL, 50, 'program_file_name', '$PROGS.%', 'server');

-- The TMF monitor process of each CPU ($SYSTEM.SYSTEM.TMFMON) is TMF's, like $TMP.
INSERT INTO _measure.component_map (system_id, priority, match_on, pattern, component)
VALUES (NULL, 10, 'program_file_name', '%.SYSTEM.TMFMON%', 'tmf_disc');
