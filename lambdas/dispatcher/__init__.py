"""The merge dispatcher: starts a lake table's Glue job only when its change files wait."""
