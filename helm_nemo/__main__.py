from helm_nemo.cli import run

run()
