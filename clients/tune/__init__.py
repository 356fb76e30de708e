"""inferd-tune's package: search.py (the search, pure), bench.py (loads and measurements), server.py (the
server and its HTTP API), modelcfg.py (config.pbtxt read and written), report.py (points.csv, report.html),
cli.py (the command line; clients/inferd-tune runs it)."""
