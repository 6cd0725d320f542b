"""One finding per root cause: the failing cases of a check, grouped by the feature they share.

``features`` reads what a case uses from the battery's declarative specs and the request that
was sent (never from a detector's or a bug's name); ``follow`` learns, for a flagged detector,
which of its cases fail and which pass; ``group`` turns those outcomes into the diagnosis that
opens the report, the JSON document and the survey.
"""
