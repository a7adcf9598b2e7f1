"""The client progress report: figures, advice on failures, HTML/JSON/CSV, where it is written."""
