"""Options: every option of every command, declared once.

table.py   how an option is declared, and what the declaration gives (click, header, checks)
rules.py   rules of single values: DNS names, label values, selectors, ports
render.py  the render's options (and init's, nodes'), by group
runs.py    the options of the commands that act on a run: apply, status, wait, delete
"""
