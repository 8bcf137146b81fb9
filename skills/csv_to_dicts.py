"""csv_to_dicts: parse CSV text into a list of dicts, one per row, keyed by the header.

Usage:
    from skills import csv_to_dicts
    rows = csv_to_dicts(open('/workspace/data.csv', encoding='utf-8').read())
    rows = csv_to_dicts(text, delimiter=';', convert=False)

The delimiter is detected among , ; tab and | when not given. A leading byte-order mark is
removed and header names are stripped of surrounding spaces. With `convert` (the default),
canonical integers ('42', '-7') become int and decimals ('3.5', '1e-3') become float; anything
else stays a string, so '007', '' and 'N/A' are kept as written. Short rows get None for the
missing columns; extra cells go to the key '_extra' as a list.
"""

import csv
import io
import re

_FLOAT = re.compile(r'^-?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?$')


def _convert(value):
    if value is None:
        return None
    s = value.strip()
    if re.fullmatch(r'-?(0|[1-9]\d*)', s):
        return int(s)
    if _FLOAT.match(s) and not re.fullmatch(r'-?\d+', s):
        return float(s)
    return value


def csv_to_dicts(text, delimiter=None, convert=True):
    """Return the rows of CSV `text` as dicts keyed by the header row."""
    if text.startswith('\ufeff'):
        text = text[1:]
    if delimiter is None:
        sample = text[:64 * 1024]
        try:
            delimiter = csv.Sniffer().sniff(sample, delimiters=',;\t|').delimiter
        except csv.Error:
            delimiter = ','
    reader = csv.reader(io.StringIO(text, newline=''), delimiter=delimiter)
    header = next(reader, None)
    if header is None:
        return []
    header = [h.strip() for h in header]
    rows = []
    for cells in reader:
        if not cells:
            continue
        row = {}
        for i, key in enumerate(header):
            value = cells[i] if i < len(cells) else None
            row[key] = _convert(value) if convert else value
        if len(cells) > len(header):
            row['_extra'] = cells[len(header):]
        rows.append(row)
    return rows
