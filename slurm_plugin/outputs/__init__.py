"""What the job gets to read: the launcher files (jinja2) and the report (text, PNG)."""
