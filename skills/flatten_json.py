"""flatten_json: turn nested dicts and lists into one flat dict of path -> value.

Usage:
    from skills import flatten_json
    flatten_json({'user': {'id': 7, 'tags': ['a', 'b']}})
    # {'user.id': 7, 'user.tags.0': 'a', 'user.tags.1': 'b'}
    flatten_json(record, sep='/')

Useful before tabulating API responses or comparing two JSON documents key by key. List items
are addressed by their index. Empty dicts and lists are kept as values ({} and []) so that no
key disappears below the top; an empty top level gives {} and a scalar gives {'': value}.
Keys are converted to str.
"""


def flatten_json(obj, sep='.'):
    """Return {path: leaf_value} for the nested dicts/lists in `obj`."""
    flat = {}
    if isinstance(obj, (dict, list, tuple)) and not obj:
        return flat
    stack = [('', obj)]
    while stack:
        prefix, value = stack.pop()
        if isinstance(value, dict) and value:
            items = [(str(k), v) for k, v in value.items()]
        elif isinstance(value, (list, tuple)) and value:
            items = [(str(i), v) for i, v in enumerate(value)]
        else:
            flat[prefix] = value
            continue
        for key, child in reversed(items):
            stack.append((prefix + sep + key if prefix else key, child))
    return flat
