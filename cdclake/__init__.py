"""cdc-lake: PostgreSQL change data capture into a Hudi lake and an event stream."""
