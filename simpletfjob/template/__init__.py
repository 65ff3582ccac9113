"""Templates: finding and reading one, its values, and rendering its text for one task.

catalog.py   a template file or built-in, its header, and the header's defaults
values.py    --set and -f values, merged as helm merges them
sandbox.py   the jinja environment: sandboxed, strict, bounded
compiled.py  the compiled template: the legacy syntax, and rendering one task's text
bare.py      the values a template only writes out as they are (`<<index>>`); a
             template of such alone is rendered without jinja
markers.py   where a placed value stands in the text, and how it is written there
"""
