-- Offer catalogues (issue 39): one line of a SkyPilot `vms.csv` gives an on-demand row (its `Price`)
-- and a spot row (its `SpotPrice`), both stored with the line they came from. A sheet's rows are
-- therefore unique per line and billing, no longer per line alone.
ALTER TABLE prices DROP CONSTRAINT prices_sheet_line_key;
ALTER TABLE prices ADD CONSTRAINT prices_sheet_line_billing_key UNIQUE (sheet_id, line, billing);
