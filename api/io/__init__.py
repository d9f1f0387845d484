"""POST /import and GET /export: interval records in (CSV) and interval records and tiers out."""
