"""Numbers for the buyer: reports, rollups, costs, currencies, time ranges and the click and
conversion logs."""
