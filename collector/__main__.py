from collector.cli import app

app(prog_name="measuredb")
