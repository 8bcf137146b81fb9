"""group_count: count rows by the value of a field, most frequent first.

Usage:
    from skills import group_count
    group_count(rows, 'status')          # {'200': 812, '404': 97, '500': 3}
    group_count(rows, lambda r: r['path'].split('/')[1])

`rows` is any iterable of dicts (e.g. from csv_to_dicts or json.load). `field` is a key, or a
function of the row. Rows without the key count under None; unhashable values (lists, dicts)
count under their repr(). The result is a plain dict ordered by count, descending; ties keep the
order in which the values first appeared.
"""

from collections import Counter


def group_count(rows, field):
    """Return {value: count} over `rows`, ordered by count, descending."""
    get = field if callable(field) else (lambda row: row.get(field))
    counts = Counter()
    for row in rows:
        value = get(row)
        try:
            hash(value)
        except TypeError:
            value = repr(value)
        counts[value] += 1
    return dict(counts.most_common())
