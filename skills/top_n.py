"""top_n: the n rows with the largest (or smallest) value of a field.

Usage:
    from skills import top_n
    top_n(rows, 'bytes')                  # 10 rows with the largest 'bytes', largest first
    top_n(rows, 'latency_ms', n=5)
    top_n(rows, 'price', n=3, reverse=False)   # 3 cheapest, cheapest first

`rows` is any iterable of dicts; `field` is a key, or a function of the row. Rows where the
value is missing or None are left out. Values that cannot be compared with each other (numbers
mixed with text) are ordered numbers first, then text. Uses a heap, so it is fast on large inputs.
"""

import heapq


def top_n(rows, field, n=10, reverse=True):
    """Return up to `n` rows ordered by `field`: largest first, or smallest first if not `reverse`."""
    get = field if callable(field) else (lambda row: row.get(field))
    keyed = [(get(row), row) for row in rows]
    keyed = [(value, row) for value, row in keyed if value is not None]
    pick = heapq.nlargest if reverse else heapq.nsmallest
    try:
        return [row for _, row in pick(n, keyed, key=lambda pair: pair[0])]
    except TypeError:
        def mixed(pair):
            value = pair[0]
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return (1 if reverse else 0, value, '')
            return (0 if reverse else 1, 0, str(value))
        return [row for _, row in pick(n, keyed, key=mixed)]
