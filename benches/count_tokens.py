"""Counts tokens of each text of a JSON list on stdin; prints the counts as a JSON list.

The tokenizer is the `tokenizer.json` the `anthropic` Python SDK shipped up to 0.34 (read with
the `tokenizers` package), so it works offline. Used by benches/gateway.rs.
"""

import json
import os
import sys

import anthropic
from tokenizers import Tokenizer

tokenizer = Tokenizer.from_file(os.path.join(os.path.dirname(anthropic.__file__), "tokenizer.json"))
texts = json.load(sys.stdin)
print(json.dumps([len(tokenizer.encode(t).ids) for t in texts]))
