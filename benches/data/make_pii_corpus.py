#!/usr/bin/env python3
"""Generate benches/data/pii_corpus.jsonl: a labeled PII corpus for benches/pii.rs.

Reproducible: stdlib only, one seeded RNG, no network. Run from anywhere:

    python3 benches/data/make_pii_corpus.py            # writes next to this script
    python3 benches/data/make_pii_corpus.py --seed 7 --out /tmp/other.jsonl

Each output line is {"text": str, "spans": [{"start": int, "end": int, "type": str}]}.
Offsets are UTF-8 BYTE offsets into `text` (what the Rust engine reports), end exclusive; the texts
contain non-ASCII names, so byte and character offsets differ. Types: EMAIL, PHONE, SSN,
CREDIT_CARD, IP_ADDRESS, API_KEY, IBAN.

Labeling conventions (the spec the engine is measured against):
- PHONE: NANP numbers (with or without +1 / 1, parentheses, dots, dashes, spaces; ten bare digits
  only after a phone word), international numbers written with a leading + (E.164 and the usual
  separators). An extension ("x204") is not part of the span.
- SSN: valid area (001-899 except 666), group (01-99) and serial (0001-9999), with dashes or
  spaces; nine bare digits only right after an SSN label.
- CREDIT_CARD: Luhn-valid numbers of real issuer ranges, plain or grouped by spaces/dashes.
- IP_ADDRESS: IPv4 (octets <= 255) and IPv6 (full, compressed, IPv4-mapped). Port and prefix
  length are not part of the span.
- API_KEY: provider keys (AWS, GitHub, Slack, OpenAI-style, Stripe, Google, JWT), and for
  key=value secrets, Bearer tokens and URL credentials only the VALUE is labeled.
- IBAN: mod-97-valid IBANs, compact or in groups of four.
Hard negatives are in the text unlabeled: versions, dates, times, timestamps, UUIDs, git SHAs,
order and tracking numbers, invalid-Luhn card-like numbers, out-of-range IPs and SSNs, hex colors,
ISBNs, ports, MAC addresses, placeholders like ${API_KEY}.
"""

import argparse
import json
import os
import random
import string

FIRST = ["Ann", "Bob", "Carlos", "Dana", "Elif", "Farah", "George", "Hana", "Ivan", "Jia", "Kofi",
         "Liam", "Maya", "Noah", "Olga", "Priya", "Quinn", "Rosa", "Sven", "Tariq", "Uma", "Victor",
         "Wei", "Ximena", "Yusuf", "Zoe", "José", "Zoë", "Søren", "Chloé", "Jörg", "Łukasz", "Aoife",
         "Nguyễn", "Björn", "Renée", "Mateo", "Amara", "Kenji", "Leila"]
LAST = ["Lee", "Smith", "García", "Müller", "Okafor", "Kowalski", "Nakamura", "Patel", "Rossi",
        "Johansson", "O'Brien", "Dubois", "Novak", "Silva", "Kim", "Haddad", "Andersen", "Ivanova",
        "Brown", "Nguyen", "Schmidt", "Fischer", "López", "Yılmaz", "Chen", "Walsh", "Moreau"]
ASCII_FIRST = ["ann", "bob", "carlos", "dana", "elif", "farah", "george", "hana", "ivan", "jia",
               "kofi", "liam", "maya", "noah", "olga", "priya", "quinn", "rosa", "sven", "tariq",
               "uma", "victor", "wei", "ximena", "yusuf", "zoe", "jose", "soren", "chloe", "jorg"]
ASCII_LAST = ["lee", "smith", "garcia", "mueller", "okafor", "kowalski", "nakamura", "patel",
              "rossi", "johansson", "obrien", "dubois", "novak", "silva", "kim", "haddad",
              "andersen", "ivanova", "brown", "nguyen", "schmidt", "fischer", "lopez", "chen"]
DOMAINS = ["example.com", "example.org", "gmail.com", "outlook.com", "yahoo.co.uk", "acme.io",
           "corp.example.net", "mail.contoso.com", "fastmail.fm", "uni-heidelberg.de",
           "proton.me", "hotmail.fr", "company.co.jp", "startup.ai", "health-clinic.org"]
CITIES = ["Berlin", "Lagos", "São Paulo", "Zürich", "Kraków", "Osaka", "Austin", "Toronto",
          "Dublin", "Lyon", "Istanbul", "Hà Nội", "Reykjavík", "Seattle", "Nairobi"]
SERVICES = ["auth-service", "billing-api", "gateway", "user-svc", "checkout", "notifier",
            "ingest-worker", "search", "crm-sync", "payments"]
PRODUCTS = ["Pro plan", "Starter plan", "USB-C hub", "standing desk", "annual license",
            "noise-cancelling headphones", "team seats", "API credits"]
WORDS = ["the", "invoice", "refund", "customer", "account", "update", "please", "check", "sent",
         "ticket", "shipment", "delayed", "urgent", "review", "approved", "pending", "merge",
         "deploy", "rollback", "ping", "thanks", "meeting", "tomorrow", "report", "draft"]

AREA_CODES = ["212", "213", "305", "312", "347", "415", "503", "512", "617", "646", "702", "718",
              "808", "917", "929", "206", "303", "404", "469", "510", "650", "720", "773", "858"]


class Line:
    """Builds a text from pieces and records labeled spans in UTF-8 byte offsets."""

    def __init__(self):
        self.parts = []
        self.spans = []
        self.nbytes = 0

    def add(self, s, label=None):
        if label is not None:
            self.spans.append({"start": self.nbytes, "end": self.nbytes + len(s.encode()),
                               "type": label})
        self.parts.append(s)
        self.nbytes += len(s.encode())
        return self

    def row(self):
        return {"text": "".join(self.parts), "spans": self.spans}


class Gen:
    def __init__(self, seed):
        self.r = random.Random(seed)

    # ---- helpers -------------------------------------------------------------------------
    def pick(self, xs):
        return self.r.choice(xs)

    def digits(self, n):
        return "".join(self.r.choice(string.digits) for _ in range(n))

    def alnum(self, n, alphabet=string.ascii_letters + string.digits):
        # Keys are random: make sure each character class of the alphabet occurs, as it does in
        # real keys of this length.
        classes = [c for c in (str.isdigit, str.isupper, str.islower) if any(c(a) for a in alphabet)]
        while True:
            s = "".join(self.r.choice(alphabet) for _ in range(n))
            if all(any(c(x) for x in s) for c in classes):
                return s

    def hexs(self, n):
        return "".join(self.r.choice("0123456789abcdef") for _ in range(n))

    def name(self):
        return f"{self.pick(FIRST)} {self.pick(LAST)}"

    def uuid(self):
        h = self.hexs(32)
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:32]}"

    def sha(self, n=40):
        return self.hexs(n)

    def timestamp(self):
        return (f"2024-{self.r.randint(1, 12):02d}-{self.r.randint(1, 28):02d}T"
                f"{self.r.randint(0, 23):02d}:{self.r.randint(0, 59):02d}:"
                f"{self.r.randint(0, 59):02d}.{self.r.randint(0, 999):03d}Z")

    def date(self):
        y, m, d = self.r.randint(2019, 2025), self.r.randint(1, 12), self.r.randint(1, 28)
        return self.pick([f"{y}-{m:02d}-{d:02d}", f"{m:02d}/{d:02d}/{y}", f"{d:02d}.{m:02d}.{y}",
                          f"{d} {self.pick(['Jan', 'Feb', 'Mar', 'Apr', 'Jun', 'Sep', 'Oct'])} {y}"])

    def version(self):
        return self.pick([
            f"{self.r.randint(0, 5)}.{self.r.randint(0, 30)}.{self.r.randint(0, 20)}",
            f"v{self.r.randint(1, 20)}.{self.r.randint(0, 9)}.{self.r.randint(0, 9)}.{self.r.randint(0, 99)}",
            f"{self.r.randint(1, 9)}.{self.r.randint(0, 9)}.{self.r.randint(0, 9)}.{self.r.randint(0, 9)}.{self.r.randint(1, 9)}",
            f"10.0.{self.r.randint(17000, 22631)}.{self.r.randint(1, 3000)}",
            f"{self.r.randint(1, 3)}.{self.r.randint(0, 12)}.{self.r.randint(0, 9)}-rc{self.r.randint(1, 4)}",
        ])

    def order_no(self):
        return self.pick([
            f"ORD-2024-{self.digits(6)}", f"#{self.r.randint(10000000, 99999999)}",
            f"PO-{self.digits(7)}", f"INV-{self.digits(6)}", f"A{self.digits(9)}",
            f"{self.r.randint(1000000000, 9999999999)}",  # ten bare digits, no phone context
            f"1Z{self.alnum(6, string.ascii_uppercase + string.digits)}{self.digits(10)}",
        ])

    # ---- PII values ----------------------------------------------------------------------
    def email(self):
        f, l, d = self.pick(ASCII_FIRST), self.pick(ASCII_LAST), self.pick(DOMAINS)
        local = self.pick([f"{f}.{l}", f"{f[0]}{l}", f"{f}_{l}{self.r.randint(1, 99)}", f"{f}",
                           f"{f}.{l}+{self.pick(['news', 'billing', 'x'])}", f"{l}.{f[0]}",
                           f"{f}{self.r.randint(1970, 2005)}"])
        e = f"{local}@{d}"
        return e.upper() if self.r.random() < 0.05 else e

    def nanp(self, bare_ok=False):
        a = self.pick(AREA_CODES) if self.r.random() < 0.7 else f"{self.r.randint(2, 9)}{self.digits(2)}"
        x = f"{self.r.randint(2, 9)}{self.digits(2)}"
        n = self.digits(4)
        forms = [f"{a}-{x}-{n}", f"({a}) {x}-{n}", f"{a}.{x}.{n}", f"{a} {x} {n}",
                 f"+1 {a} {x} {n}", f"+1-{a}-{x}-{n}", f"1-{a}-{x}-{n}", f"+1 ({a}) {x}-{n}",
                 f"({a}){x}-{n}", f"+1{a}{x}{n}"]
        if bare_ok:
            forms.append(f"{a}{x}{n}")
        return self.pick(forms)

    def intl_phone(self):
        return self.pick([
            f"+44 20 {self.digits(4)} {self.digits(4)}",
            f"+44 7{self.digits(3)} {self.digits(6)}",
            f"+49 30 {self.digits(7)}", f"+49 151 {self.digits(8)}",
            f"+4915{self.digits(9)}",
            f"+33 1 {self.digits(2)} {self.digits(2)} {self.digits(2)} {self.digits(2)}",
            f"+33 (0)6 {self.digits(2)} {self.digits(2)} {self.digits(2)} {self.digits(2)}",
            f"+91 9{self.digits(4)} {self.digits(5)}", f"+81-3-{self.digits(4)}-{self.digits(4)}",
            f"+61 2 {self.digits(4)} {self.digits(4)}", f"+55 (11) 9{self.digits(4)}-{self.digits(4)}",
            f"+34 6{self.digits(2)} {self.digits(3)} {self.digits(3)}",
            f"+86 138 {self.digits(4)} {self.digits(4)}", f"+234 803 {self.digits(3)} {self.digits(4)}",
            f"+353 87 {self.digits(3)} {self.digits(4)}", f"+31 6 {self.digits(8)}",
        ])

    def phone(self):
        return self.nanp() if self.r.random() < 0.65 else self.intl_phone()

    def ssn_digits(self):
        while True:
            a = self.r.randint(1, 899)
            if a != 666:
                break
        return f"{a:03d}", f"{self.r.randint(1, 99):02d}", f"{self.r.randint(1, 9999):04d}"

    def ssn(self):
        a, g, s = self.ssn_digits()
        return f"{a}-{g}-{s}" if self.r.random() < 0.85 else f"{a} {g} {s}"

    def bad_ssn(self):
        a, g, s = self.ssn_digits()
        return self.pick([f"000-{g}-{s}", f"666-{g}-{s}", f"9{self.digits(2)}-{g}-{s}",
                          f"{a}-00-{s}", f"{a}-{g}-0000"])

    @staticmethod
    def luhn_complete(prefix_digits):
        total = 0
        for i, c in enumerate(reversed(prefix_digits)):
            d = int(c)
            if i % 2 == 0:
                d *= 2
                if d > 9:
                    d -= 9
            total += d
        return prefix_digits + str((10 - total % 10) % 10)

    def card_digits(self):
        brand = self.pick(["visa", "visa", "visa", "mc", "mc", "mc2", "amex", "discover", "jcb",
                           "diners", "unionpay"])
        if brand == "visa":
            return self.luhn_complete("4" + self.digits(14)), brand
        if brand == "mc":
            return self.luhn_complete(f"5{self.r.randint(1, 5)}" + self.digits(13)), brand
        if brand == "mc2":
            return self.luhn_complete(f"{self.r.randint(2221, 2720)}" + self.digits(11)), brand
        if brand == "amex":
            return self.luhn_complete(self.pick(["34", "37"]) + self.digits(12)), brand
        if brand == "discover":
            return self.luhn_complete("6011" + self.digits(11)), brand
        if brand == "jcb":
            return self.luhn_complete(f"{self.r.randint(3528, 3589)}" + self.digits(11)), brand
        if brand == "diners":
            return self.luhn_complete(f"30{self.r.randint(0, 5)}" + self.digits(10)), brand
        return self.luhn_complete("62" + self.digits(13)), brand

    def fmt_card(self, d):
        sep = self.pick(["", " ", "-", " "])
        if not sep:
            return d
        if len(d) == 15:
            return f"{d[:4]}{sep}{d[4:10]}{sep}{d[10:]}"
        if len(d) == 14:
            return f"{d[:4]}{sep}{d[4:10]}{sep}{d[10:]}"
        return sep.join(d[i:i + 4] for i in range(0, len(d), 4))

    def card(self):
        return self.fmt_card(self.card_digits()[0])

    def bad_card(self):
        d, _ = self.card_digits()
        bad = d[:-1] + str((int(d[-1]) + self.r.randint(1, 9)) % 10)
        return self.fmt_card(bad)

    def ipv4(self):
        return self.pick([
            f"10.{self.r.randint(0, 255)}.{self.r.randint(0, 255)}.{self.r.randint(1, 254)}",
            f"192.168.{self.r.randint(0, 255)}.{self.r.randint(1, 254)}",
            f"172.{self.r.randint(16, 31)}.{self.r.randint(0, 255)}.{self.r.randint(1, 254)}",
            f"{self.r.randint(11, 223)}.{self.r.randint(0, 255)}.{self.r.randint(0, 255)}.{self.r.randint(1, 254)}",
            f"{self.r.randint(11, 223)}.{self.r.randint(0, 255)}.{self.r.randint(0, 255)}.{self.r.randint(1, 254)}",
        ])

    def bad_ipv4(self):
        return self.pick([
            f"{self.r.randint(256, 999)}.{self.r.randint(0, 255)}.{self.r.randint(0, 255)}.{self.r.randint(0, 255)}",
            f"192.168.{self.r.randint(0, 255)}.{self.r.randint(256, 999)}",
            f"10.{self.r.randint(300, 999)}.0.{self.r.randint(1, 9)}",
        ])

    def ipv6(self):
        g = [self.hexs(4) for _ in range(8)]
        return self.pick([
            ":".join(g),
            f"2001:db8:{g[2].lstrip('0') or '0'}::{g[6].lstrip('0') or '0'}:{g[7]}",
            f"fe80::{g[4].lstrip('0') or '1'}:{g[5]}:{g[6]}:{g[7]}",
            f"2a02:{g[1]}:{g[2]}:{g[3]}::{self.r.randint(1, 9)}",
            f"::ffff:{self.ipv4()}",
            f"2001:0db8:{g[2]}:0000:0000:{g[5]}:{g[6]}:{g[7]}",
        ])

    def ip(self):
        return self.ipv4() if self.r.random() < 0.75 else self.ipv6()

    def iban(self):
        cc, bban = self.pick([
            ("DE", lambda: self.digits(18)), ("GB", lambda: self.pick(["NWBK", "BARC", "LOYD", "MIDL"]) + self.digits(14)),
            ("FR", lambda: self.digits(23)), ("NL", lambda: self.pick(["ABNA", "INGB", "RABO"]) + self.digits(10)),
            ("ES", lambda: self.digits(20)), ("IT", lambda: "X" + self.digits(22)),
            ("CH", lambda: self.digits(17)), ("BE", lambda: self.digits(12)),
            ("AT", lambda: self.digits(16)), ("PL", lambda: self.digits(24)),
        ])
        bban = bban()
        num = "".join(str(int(c, 36)) for c in bban + cc + "00")
        check = 98 - int(num) % 97
        iban = f"{cc}{check:02d}{bban}"
        if self.r.random() < 0.55:
            iban = " ".join(iban[i:i + 4] for i in range(0, len(iban), 4))
        return iban

    def provider_key(self):
        kind = self.pick(["aws", "aws", "ghp", "ghs", "gh_pat", "slack", "openai", "openai_proj",
                          "stripe", "stripe_rk", "google", "jwt"])
        if kind == "aws":
            return self.pick(["AKIA", "ASIA"]) + self.alnum(16, string.ascii_uppercase + string.digits)
        if kind == "ghp":
            return "ghp_" + self.alnum(36)
        if kind == "ghs":
            return self.pick(["gho_", "ghu_", "ghs_", "ghr_"]) + self.alnum(36)
        if kind == "gh_pat":
            return "github_pat_" + self.alnum(22) + "_" + self.alnum(59)
        if kind == "slack":
            return f"xox{self.pick('bpa')}-{self.digits(12)}-{self.digits(13)}-{self.alnum(24)}"
        if kind == "openai":
            return "sk-" + self.alnum(48)
        if kind == "openai_proj":
            return "sk-proj-" + self.alnum(40) + "_" + self.alnum(20) + "-" + self.alnum(30)
        if kind == "stripe":
            return f"sk_{self.pick(['live', 'test'])}_" + self.alnum(24)
        if kind == "stripe_rk":
            return f"rk_{self.pick(['live', 'test'])}_" + self.alnum(24)
        if kind == "google":
            return "AIza" + self.alnum(35, string.ascii_letters + string.digits + "_-")
        hdr = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
        return f"{hdr}.eyJ{self.alnum(40, string.ascii_letters + string.digits + '_-')}.{self.alnum(43, string.ascii_letters + string.digits + '_-')}"

    def password(self):
        w = self.pick(["Summer", "Winter", "Dragon", "Monkey", "Sunshine", "Coffee", "Purple", "Tiger"])
        return self.pick([
            f"{w}{self.r.randint(2000, 2025)}!", f"{w.lower()}{self.r.randint(10, 99)}",
            self.alnum(12, string.ascii_letters + string.digits + "!@#%^*-_+=?"),
            self.alnum(16), f"P@ssw0rd{self.r.randint(1, 999)}", f"{w}_{self.alnum(6)}",
        ]).lstrip("!@#%^*-_+=?") or "Zx9" + self.alnum(8)

    def secret_value(self):
        return self.pick([self.hexs(32), self.hexs(40), self.alnum(32), self.alnum(24),
                          self.alnum(40, string.ascii_letters + string.digits + "/+")])

    # ---- line shapes ---------------------------------------------------------------------
    def neg_filler(self):
        """A hard negative phrase (unlabeled)."""
        return self.pick([
            f"version {self.version()}", f"v{self.version().lstrip('v')}", f"on {self.date()}",
            f"at {self.r.randint(0, 23):02d}:{self.r.randint(0, 59):02d}:{self.r.randint(0, 59):02d}",
            f"id={self.uuid()}", f"commit {self.sha()}", f"sha {self.sha(7)}",
            f"order {self.order_no()}", f"card ending {self.digits(4)}", f"ref {self.bad_card()}",
            f"src {self.bad_ipv4()}", f"legacy id {self.bad_ssn()}", f"color #{self.hexs(6)}",
            f"ISBN 978-0-{self.digits(3)}-{self.digits(5)}-{self.digits(1)}", f"port {self.r.randint(1024, 65535)}",
            f"mac 00:1a:{self.hexs(2)}:{self.hexs(2)}:{self.hexs(2)}:{self.hexs(2)}",
            f"ts={self.r.randint(1600000000, 1760000000)}", f"ts_ms={self.r.randint(1600000000000, 1760000000000)}",
            f"amount ${self.r.randint(1, 99)},{self.digits(3)}.{self.digits(2)}",
            f"build {self.r.randint(1000, 99999)}", f"zip {self.digits(5)}", f"{self.r.randint(2, 64)} GiB",
            f"localhost:{self.r.randint(3000, 9999)}", f"Chrome/{self.r.randint(100, 125)}.0.0.0",
            f"OID 1.3.6.1.4.1.{self.r.randint(100, 99999)}", "logo@2x.png",
            f"x[{self.r.randint(1, 9)}::{self.r.randint(2, 4)}]", "std::vector<int>",
            f"token_count={self.r.randint(100, 99999)}", "api_key=${OPENAI_API_KEY}",
            "password: ********", f"max_tokens: {self.pick([256, 1024, 4096])}",
        ])

    def log_line(self):
        L = Line()
        ts = self.timestamp()
        lvl = self.pick(["INFO", "WARN", "ERROR", "DEBUG"])
        svc = self.pick(SERVICES)
        shape = self.r.randint(0, 9)
        if shape == 0:
            L.add(f"{ts} {lvl} [{svc}] login ok user=").add(self.email(), "EMAIL").add(" ip=").add(self.ip(), "IP_ADDRESS")
            L.add(f" session={self.uuid()} latency_ms={self.r.randint(3, 900)}")
        elif shape == 1:
            ip = self.ipv4()
            L.add(f"{self.pick(['Mar', 'Apr', 'Nov'])} {self.r.randint(1, 28):2d} {self.r.randint(0, 23):02d}:{self.r.randint(0, 59):02d}:{self.r.randint(0, 59):02d} web-0{self.r.randint(1, 9)} sshd[{self.r.randint(300, 40000)}]: ")
            L.add(self.pick(["Accepted publickey for deploy from ", "Failed password for invalid user admin from "]))
            L.add(ip, "IP_ADDRESS").add(f" port {self.r.randint(1024, 65535)} ssh2")
        elif shape == 2:
            L.add(f"[{ts[:19].replace('T', ' ')}] {lvl} payment failed card=").add(self.card(), "CREDIT_CARD")
            L.add(f" order={self.order_no()} amount={self.r.randint(5, 900)}.{self.digits(2)} currency=EUR")
        elif shape == 3:
            L.add(self.ipv4(), "IP_ADDRESS").add(f" - - [{self.r.randint(1, 28):02d}/Mar/2024:{self.r.randint(0, 23):02d}:{self.r.randint(0, 59):02d}:{self.r.randint(0, 59):02d} +0000] ")
            L.add(f"\"GET /api/v{self.r.randint(1, 3)}/orders/{self.r.randint(1000, 99999)} HTTP/1.1\" {self.pick([200, 200, 304, 404, 500])} {self.r.randint(100, 90000)} \"-\" ")
            L.add(f"\"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/{self.r.randint(100, 125)}.0.0.0 Safari/537.36\"")
        elif shape == 4:
            L.add(f"{ts} {lvl} {svc}: outbound SMS to ").add(self.phone(), "PHONE").add(f" queued (msg_id={self.uuid()}, attempt {self.r.randint(1, 3)})")
        elif shape == 5:
            L.add(f"{ts} DEBUG {svc} config loaded: region=eu-west-1 ")
            k = self.r.randint(0, 3)
            if k == 0:
                L.add("aws_access_key_id=").add("AKIA" + self.alnum(16, string.ascii_uppercase + string.digits), "API_KEY")
                L.add(" aws_secret_access_key=").add(self.alnum(40, string.ascii_letters + string.digits + "/+"), "API_KEY")
            elif k == 1:
                L.add("STRIPE_KEY=").add(f"sk_live_{self.alnum(24)}", "API_KEY").add(f" timeout={self.r.randint(5, 60)}s")
            elif k == 2:
                L.add("db=postgres://app_user:").add(self.alnum(14), "API_KEY").add(f"@db-{self.r.randint(1, 9)}.internal:5432/orders pool=20")
            else:
                L.add("api_key=${API_KEY} (unset, using default) retries=3")
        elif shape == 6:
            L.add(f"{ts} {lvl} [{svc}] upstream ").add(self.ipv6(), "IP_ADDRESS").add(f" timed out after {self.r.randint(1, 30)}s; next try at {self.r.randint(0, 23):02d}:{self.r.randint(0, 59):02d}:{self.r.randint(0, 59):02d}")
        elif shape == 7:
            L.add(f"{ts} WARN [{svc}] KYC check mismatch for customer {self.r.randint(10000, 99999)}: ssn=").add(self.ssn(), "SSN")
            L.add(f" dob={self.date()}")
        elif shape == 8:
            L.add(f"{ts} INFO deploy {svc} {self.version()} commit {self.sha()} image sha256:{self.hexs(64)} to {self.pick(['prod', 'staging'])} ({self.r.randint(2, 12)} pods)")
        else:
            L.add(f"{ts} {lvl} [{svc}] request {self.uuid()} from ").add(self.ipv4(), "IP_ADDRESS").add(f":{self.r.randint(1024, 65535)} {self.neg_filler()}")
        return L

    def csv_line(self):
        L = Line()
        shape = self.r.randint(0, 3)
        if shape == 0:
            L.add(f"{self.r.randint(1000, 99999)},\"{self.name()}\",").add(self.email(), "EMAIL").add(",").add(self.phone(), "PHONE")
            L.add(f",{self.pick(CITIES)},{self.date()}")
        elif shape == 1:
            L.add(f"{self.r.randint(1, 9999)};{self.name()};").add(self.ssn(), "SSN").add(";").add(self.card(), "CREDIT_CARD")
            L.add(f";{self.r.randint(1, 12):02d}/{self.r.randint(25, 31)};{self.order_no()}")
        elif shape == 2:
            L.add(f"{self.uuid()},{self.name()},").add(self.iban(), "IBAN").add(f",{self.r.randint(10, 9999)}.{self.digits(2)},EUR,{self.date()}")
        else:
            L.add(f"{self.date()},{self.pick(PRODUCTS)},{self.r.randint(1, 20)},{self.r.randint(5, 999)}.{self.digits(2)},{self.order_no()},{self.version()}")
        return L

    def json_line(self):
        L = Line()
        shape = self.r.randint(0, 4)
        if shape == 0:
            L.add(f'{{"id": {self.r.randint(1, 99999)}, "name": "{self.name()}", "email": "').add(self.email(), "EMAIL")
            L.add('", "phone": "').add(self.phone(), "PHONE").add(f'", "created_at": "{self.timestamp()}", "city": "{self.pick(CITIES)}"}}')
        elif shape == 1:
            L.add(f'{{"event": "payment", "uuid": "{self.uuid()}", "card": "').add(self.card(), "CREDIT_CARD")
            L.add(f'", "amount": {self.r.randint(1, 999)}.{self.digits(2)}, "iban": "').add(self.iban(), "IBAN").add('"}')
        elif shape == 2:
            L.add('{"provider": "openai", "api_key": "').add(self.provider_key(), "API_KEY")
            L.add(f'", "model": "gpt-4o", "max_tokens": {self.pick([256, 1024, 4096])}, "temperature": 0.{self.r.randint(0, 9)}}}')
        elif shape == 3:
            L.add(f'{{"client_id": "{self.hexs(20)}", "client_secret": "').add(self.secret_value(), "API_KEY")
            L.add(f'", "redirect_uri": "https://app.example.com/callback", "scope": "read write", "version": "{self.version()}"}}')
        else:
            L.add(f'{{"host": "').add(self.ip(), "IP_ADDRESS").add(f'", "port": {self.r.randint(1024, 65535)}, "tls": true, "sha": "{self.sha()}", "updated": "{self.date()}"}}')
        return L

    def email_msg(self):
        L = Line()
        to, frm = self.name(), self.name()
        L.add(f"From: {frm} <").add(self.email(), "EMAIL").add(">\nTo: ").add(self.email(), "EMAIL")
        L.add(f"\nDate: {self.date()}\nSubject: {self.pick(['Invoice', 'Your refund', 'Wire details', 'Account update'])} {self.order_no()}\n\n")
        L.add(f"Hi {to.split()[0]},\n\n")
        shape = self.r.randint(0, 3)
        if shape == 0:
            L.add("Please wire the deposit to IBAN ").add(self.iban(), "IBAN")
            L.add(f" before {self.date()}. Reference: {self.order_no()}.\n")
        elif shape == 1:
            L.add("You can reach me on ").add(self.phone(), "PHONE").add(" or my mobile ").add(self.phone(), "PHONE")
            L.add(f" (after {self.r.randint(1, 6)} pm).\n")
        elif shape == 2:
            L.add("The card on file (").add(self.card(), "CREDIT_CARD").add(f") was declined on {self.date()}; the order {self.order_no()} is on hold.\n")
        else:
            L.add(f"Attached is the report for {self.pick(PRODUCTS)} (build {self.r.randint(100, 9999)}, {self.version()}). Nothing else changed.\n")
        L.add(f"\nBest,\n{frm}\n")
        if self.r.random() < 0.5:
            L.add("Tel. ").add(self.nanp(), "PHONE").add(" | ").add(self.email(), "EMAIL")
        return L

    def chat_line(self):
        L = Line()
        who = self.pick(FIRST)
        L.add(f"{who}: ")
        shape = self.r.randint(0, 9)
        if shape == 0:
            L.add("hey can you reset the password for ").add(self.email(), "EMAIL").add("? her number is ").add(self.nanp(), "PHONE")
        elif shape == 1:
            L.add("my ssn is ").add(self.ssn(), "SSN").add(" pls don't share 🙏")
        elif shape == 2:
            L.add("oops I pasted the key in the channel: ").add(self.provider_key(), "API_KEY").add(" — rotating now")
        elif shape == 3:
            L.add(f"the server at ").add(self.ipv4(), "IP_ADDRESS").add(f" is down again, {self.neg_filler()}")
        elif shape == 4:
            L.add(f"shipping {self.pick(PRODUCTS)} to {self.pick(CITIES)}, tracking {self.order_no()}, eta {self.date()}")
        elif shape == 5:
            L.add("card is ").add(self.card(), "CREDIT_CARD").add(f" exp {self.r.randint(1, 12):02d}/{self.r.randint(25, 31)}")
        elif shape == 6:
            L.add("call me at ").add(self.phone(), "PHONE").add(f" after {self.r.randint(1, 11)}:{self.pick(['00', '15', '30', '45'])}")
        elif shape == 7:
            L.add(f"merged PR #{self.r.randint(100, 9999)}, bumped lodash 4.17.20 → 4.17.21 and {self.neg_filler()} 👍")
        elif shape == 8:
            L.add("SSN: ").add(f"{''.join(self.ssn_digits())}", "SSN").add(f", DOB {self.date()}, member since {self.r.randint(2001, 2023)}")
        else:
            L.add("电话 ").add(self.intl_phone(), "PHONE").add(f"，邮箱 ").add(self.email(), "EMAIL").add(f" — {self.pick(CITIES)}")
        return L

    def config_line(self):
        L = Line()
        shape = self.r.randint(0, 9)
        if shape == 0:
            L.add("export GITHUB_TOKEN=").add("ghp_" + self.alnum(36), "API_KEY")
        elif shape == 1:
            L.add("DB_PASSWORD=").add(self.password(), "API_KEY").add(f"\nDB_HOST=").add(self.ipv4(), "IP_ADDRESS").add(f"\nDB_PORT={self.pick([5432, 3306])}")
        elif shape == 2:
            L.add(f"password: \"").add(self.password(), "API_KEY").add(f"\"\nusername: {self.pick(ASCII_FIRST)}\nretries: 3")
        elif shape == 3:
            L.add("Authorization: Bearer ").add(self.alnum(40, string.ascii_letters + string.digits + "-_"), "API_KEY")
        elif shape == 4:
            L.add(f"curl -s 'https://api.example.com/v1/export?token=").add(self.hexs(32), "API_KEY").add(f"&format=csv&since={self.date()}'")
        elif shape == 5:
            L.add("OPENAI_API_KEY=").add(self.provider_key(), "API_KEY").add("\nLOG_LEVEL=info")
        elif shape == 6:
            L.add(f"api_key = os.environ[\"API_KEY\"]  # never hardcode\ntoken = tokenizer.encode(text)  # {self.r.randint(100, 999)} tokens")
        elif shape == 7:
            L.add("slack:\n  webhook_secret: ").add(self.secret_value(), "API_KEY").add(f"\n  channel: \"#alerts\"\n  color: \"#{self.hexs(6)}\"")
        elif shape == 8:
            L.add("-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(self.alnum(64, string.ascii_letters + string.digits + "+/") for _ in range(3)) + "\n-----END RSA PRIVATE KEY-----", "API_KEY")
        else:
            L.add(f"[tool.poetry.dependencies]\npython = \"^3.11\"\nrequests = \"{self.version()}\"\nsecret_rotation_days = 90\npassword_min_length = 12")
        return L

    def negative_line(self):
        L = Line()
        n = self.r.randint(2, 4)
        words = " ".join(self.pick(WORDS) for _ in range(self.r.randint(2, 6)))
        L.add(words.capitalize() + ": " + ", ".join(self.neg_filler() for _ in range(n)) + ".")
        return L

    def tricky_line(self):
        """Shapes that trip simple patterns: escaped JSON in logs, URL-encoded emails, reprs,
        brackets, extensions, look-alike numbers next to real values."""
        L = Line()
        shape = self.r.randint(0, 19)
        ts = self.timestamp()
        if shape == 0:
            L.add(f'{ts} ERROR [{self.pick(SERVICES)}] bad payload: "{{\\"email\\":\\"').add(self.email(), "EMAIL")
            L.add('\\",\\"password\\":\\"').add(self.password(), "API_KEY").add('\\"}"')
        elif shape == 1:
            f, l, d = self.pick(ASCII_FIRST), self.pick(ASCII_LAST), self.pick(DOMAINS)
            L.add(self.ipv4(), "IP_ADDRESS").add(f' - - [{self.r.randint(1, 28):02d}/Apr/2024:10:{self.r.randint(10, 59)}:{self.r.randint(10, 59)} +0000] "GET /unsubscribe?email=')
            L.add(f"{f}.{l}%40{d}", "EMAIL").add(f'&list={self.r.randint(1, 99)} HTTP/1.1" 302 0')
        elif shape == 2:
            L.add("{'name': '" + self.name() + "', 'ssn': '").add(self.ssn(), "SSN").add("', 'phone': '").add(self.nanp(), "PHONE")
            L.add(f"', 'zip': '{self.digits(5)}-{self.digits(4)}', 'dob': '{self.date()}'}}")
        elif shape == 3:
            L.add("upstream=[").add(self.ipv6(), "IP_ADDRESS").add(f"]:{self.pick([443, 8443, 9000])} X-Forwarded-For: ").add(self.ipv4(), "IP_ADDRESS")
            L.add(", ").add(self.ipv4(), "IP_ADDRESS")
        elif shape == 4:
            L.add("Main line ").add(self.nanp(), "PHONE").add(f" ext. {self.r.randint(10, 999)}, fax ").add(self.nanp(), "PHONE")
            L.add(f", SKU {self.digits(3)}-{self.digits(4)}, ZIP {self.digits(5)}-{self.digits(4)}")
        elif shape == 5:
            L.add(f"client = OpenAI(api_key=\"").add(self.provider_key(), "API_KEY").add(f"\", timeout={self.r.randint(10, 60)})  # {self.version()}")
        elif shape == 6:
            L.add("[default]\naws_access_key_id = ").add("AKIA" + self.alnum(16, string.ascii_uppercase + string.digits), "API_KEY")
            L.add("\naws_secret_access_key = ").add(self.alnum(40, string.ascii_letters + string.digits + "/+"), "API_KEY")
            L.add(f"\nregion = {self.pick(['us-east-1', 'eu-central-1'])}")
        elif shape == 7:
            L.add(f"headers = {{\"Authorization\": f\"Bearer {{token}}\", \"X-Request-Id\": \"{self.uuid()}\"}}  # token = None until login")
        elif shape == 8:
            L.add(f"password_hash: $2b$12${self.alnum(53, string.ascii_letters + string.digits + './')}\npassword: {{{{ vault_db_password }}}}\ntoken_type: bearer\nrefresh_token_expires_in: 7776000")
        elif shape == 9:
            L.add(f"Python {self.pick(['3.11.7', '3.12.2'])}, node v20.{self.r.randint(1, 11)}.{self.r.randint(0, 9)}, nginx/1.25.{self.r.randint(0, 5)}, Ubuntu 22.04.{self.r.randint(1, 4)} LTS, kernel 6.5.0-{self.r.randint(1000, 1999)}-azure, uptime {self.r.randint(1, 99)} days, {self.r.randint(0, 23):02d}:{self.r.randint(0, 59):02d}:{self.r.randint(0, 59):02d}")
        elif shape == 10:
            L.add(f"Checksum failed for DE00 {self.digits(4)} {self.digits(4)} {self.digits(4)} {self.digits(4)} {self.digits(2)}; test card 0000 0000 0000 0000 and 1234 5678 9012 3456 rejected; routing {self.digits(9)}")
        elif shape == 11:
            L.add("Card: ").add(self.card(), "CREDIT_CARD").add(f" Exp: {self.r.randint(1, 12):02d}/{self.r.randint(25, 31)} CVV: {self.digits(3)} — billed to ").add(self.email(), "EMAIL")
        elif shape == 12:
            L.add(f"SSN#: ").add(self.ssn(), "SSN").add(f"; Social Security Number ").add("".join(self.ssn_digits()), "SSN").add(f" on file since {self.date()}")
        elif shape == 13:
            L.add("Pay to IBAN: ").add(self.iban().replace(" ", ""), "IBAN").add(f". Amount: {self.r.randint(10, 9999)},{self.digits(2)} EUR. Ref {self.order_no()}.")
        elif shape == 14:
            L.add(f"Stripe('").add(f"sk_test_{self.alnum(24)}", "API_KEY").add(f"'); // pk_test_{self.alnum(24)} is the publishable one")
        elif shape == 15:
            L.add(f"{ts} INFO std::collections::HashMap rebuilt ({self.r.randint(2, 99)} buckets); slice x[1::2] and a[::3]; color rgba(255, 255, 255, 0.5); #{self.hexs(3)}")
        elif shape == 16:
            L.add(f"（联系：").add(self.email(), "EMAIL").add("）电话：").add(self.intl_phone(), "PHONE").add("。")
        elif shape == 17:
            L.add(f'{{"user": {{"phone_number": "').add(self.nanp(bare_ok=True), "PHONE").add(f'", "tokens_used": {self.r.randint(100, 99999)}, "api_key": null, "last_ip": "').add(self.ipv4(), "IP_ADDRESS").add('"}}')
        elif shape == 18:
            L.add(f"mysql --host=").add(self.ipv4(), "IP_ADDRESS").add(f" --user=admin --password=").add(self.password(), "API_KEY").add(f" --port={self.pick([3306, 3307])} orders")
        else:
            L.add(f"+{self.r.randint(2, 40)}% vs last week, +{self.r.randint(100, 999)} signups, 1-800-FLOWERS promo, score {self.r.randint(1, 9)}.{self.r.randint(0, 9)}/10, ISBN 0-306-40615-2")
        return L

    def generate(self, n):
        makers = [(self.log_line, 20), (self.csv_line, 11), (self.json_line, 11), (self.email_msg, 5),
                  (self.chat_line, 14), (self.config_line, 9), (self.negative_line, 16), (self.tricky_line, 14)]
        pool = [m for m, w in makers for _ in range(w)]
        return [self.pick(pool)().row() for _ in range(n)]


# Hand-written lines in the shapes of real tool output, written without running the engine on
# them (a check on the generator's own blind spots). Markup: ⟦TYPE|value⟧ marks a labeled span.
HANDWRITTEN = [
    "commit 9fceb02d0ae598e95dc970b74767f19372d61af8\nAuthor: Maya Patel <⟦EMAIL|maya.patel@example.com⟧>\nDate:   Tue Mar 12 14:03:22 2024 +0100\n\n    Bump serde from 1.0.196 to 1.0.197",
    "Successfully installed certifi-2024.2.2 charset-normalizer-3.3.2 idna-3.6 requests-2.31.0 urllib3-2.2.1",
    "CONTAINER ID   IMAGE          COMMAND                  CREATED        STATUS        PORTS                    NAMES\n3f4e8a9b1c2d   nginx:1.25.4   \"/docker-entrypoint.…\"   2 hours ago    Up 2 hours    ⟦IP_ADDRESS|0.0.0.0⟧:8080->80/tcp     web",
    "NAME                         READY   STATUS    RESTARTS   AGE   IP            NODE\napi-7d9f8b6c5d-x2k4q         1/1     Running   0          3d    ⟦IP_ADDRESS|10.244.1.17⟧   node-2",
    "Traceback (most recent call last):\n  File \"/app/billing.py\", line 88, in charge\n    raise CardDeclined(f\"card {card} declined\")\nbilling.CardDeclined: card ⟦CREDIT_CARD|4000 0566 5566 5556⟧ declined",
    " id  | email                     | phone          | created_at\n-----+---------------------------+----------------+---------------------\n 101 | ⟦EMAIL|r.novak@example.org⟧        | ⟦PHONE|+420 601 123 456⟧ | 2024-02-01 09:12:44",
    " 102 | ⟦EMAIL|tom.h@example.com⟧         | ⟦PHONE|(312) 555-0199⟧ | 2024-02-01 09:13:02",
    "Hi team, the customer's SSN is ⟦SSN|078-05-1120⟧ and her Amex is ⟦CREDIT_CARD|3782 822463 10005⟧, please verify before Friday.",
    "X-Forwarded-For: ⟦IP_ADDRESS|203.0.113.195⟧, ⟦IP_ADDRESS|70.41.3.18⟧, ⟦IP_ADDRESS|150.172.238.178⟧",
    "Set-Cookie: session=7f3b2c1a9d8e; Path=/; HttpOnly; Max-Age=3600",
    "resource \"aws_db_instance\" \"main\" {\n  engine_version = \"15.4\"\n  username       = \"app\"\n  password       = \"⟦API_KEY|Zq8!vR2#pL9x⟧\"\n}",
    "ERROR 1045 (28000): Access denied for user 'root'@'localhost' (using password: YES)",
    "2024-04-02 11:22:33,456 INFO werkzeug ⟦IP_ADDRESS|192.168.1.23⟧ - - [02/Apr/2024 11:22:33] \"POST /login HTTP/1.1\" 302 -",
    "Your verification code is 482913. It expires in 10 minutes. Call ⟦PHONE|1-800-555-0199⟧ if this wasn't you.",
    "Transfer of EUR 1.250,00 to ⟦IBAN|NL91 ABNA 0417 1643 00⟧ (BIC ABNANL2A) scheduled for 15.04.2024.",
    "BIC: COBADEFFXXX, IBAN: ⟦IBAN|DE44500105175407324931⟧, Verwendungszweck: Rechnung 2024-0815",
    "slack export: <@U024BE7LH> shared ⟦API_KEY|xoxb-263594206564-2343483276561-0d8a1b2c3d4e5f6a7b8c9d0e⟧ in #deploys at 1712054400.123456",
    "GITHUB_TOKEN: ${{ secrets.GITHUB_TOKEN }}\nNPM_TOKEN: ${{ secrets.NPM_TOKEN }}",
    "$ gh auth status\n  ✓ Logged in to github.com account octo-dev (keyring)\n  - Token: ⟦API_KEY|gho_16C7e42F292c6912E7710c838347Ae178B4a⟧",
    "ping6 ⟦IP_ADDRESS|2606:4700:4700::1111⟧ -c 3\n64 bytes from ⟦IP_ADDRESS|2606:4700:4700::1111⟧: icmp_seq=1 ttl=57 time=12.3 ms",
    "inet ⟦IP_ADDRESS|172.17.0.1⟧  netmask ⟦IP_ADDRESS|255.255.0.0⟧  broadcast ⟦IP_ADDRESS|172.17.255.255⟧\n        inet6 ⟦IP_ADDRESS|fe80::42:acff:fe11:1⟧  prefixlen 64  scopeid 0x20<link>\n        ether 02:42:ac:11:00:01  txqueuelen 0  (Ethernet)",
    "Order #100045821 placed on 2024-03-30 for $1,299.00 — tracking 1Z999AA10123456784, est. delivery 04/03/2024.",
    "Meeting moved to 14:30 (CET). Dial-in: ⟦PHONE|+49 30 5683 7920⟧, PIN 552 819#",
    "Lieferadresse: Hauptstraße 5, 10115 Berlin, Tel. ⟦PHONE|+49 151 23456789⟧, E-Mail: ⟦EMAIL|jörg.mueller@example.de⟧",
    "Cliente: María López — móvil ⟦PHONE|+34 612 345 678⟧ — correo ⟦EMAIL|maria.lopez@correo.es⟧",
    "用户 王伟 的邮箱是 ⟦EMAIL|wangwei@example.cn⟧，手机号 ⟦PHONE|+86 139 1234 5678⟧。",
    "Patient DOB 04/12/1987, MRN 00482913, insurance id W123456789, callback ⟦PHONE|617.555.0142⟧",
    "sha256sum: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  empty.txt",
    "UUIDs: 123e4567-e89b-12d3-a456-426614174000, 9b2f0c1e-3a4d-4e5f-8a6b-7c8d9e0f1a2b",
    "Version 4.2.0.1 released on 2024-01-15; see build 20240115.3 and tag v4.2.0-rc.1",
    "conn = psycopg2.connect(\"postgresql://report:⟦API_KEY|s3cr3tP4ss⟧@⟦IP_ADDRESS|10.0.4.12⟧:5432/analytics\")",
    "curl -H \"Authorization: Bearer ⟦API_KEY|eyJhbGciOiJSUzI1NiIsImtpZCI6IjEifQ.eyJzdWIiOiIxMjM0NTY3ODkwIiwiaWF0IjoxNTE2MjM5MDIyfQ.dBjftJeZ4CVPmB92K27uhbUJU1p1r_wW1gFWFOEjXk⟧\" https://api.example.com/v1/me",
    "stripe listen --api-key ⟦API_KEY|sk_test_51H8b2cLkdIwHu7ixYz3NqK9aB4cD5eF6gH7iJ8kL⟧",
    "Hey! Here's my new number: ⟦PHONE|(646) 555-0173⟧ — old one (212) 555-01 is dead",
    "The range ⟦IP_ADDRESS|10.0.0.0⟧/8 is private; ⟦IP_ADDRESS|8.8.8.8⟧ is Google DNS; 999.1.1.1 is not an address.",
    "card_last4=4242 exp_month=12 exp_year=2027 brand=visa fingerprint=Xt5EWLLDS7FJjR1c",
    "Luhn test: 4111 1111 1111 1112 fails, ⟦CREDIT_CARD|4111 1111 1111 1111⟧ passes (test numbers only)",
    "aws s3 cp s3://bucket/key . --profile prod  # uses ⟦API_KEY|AKIAIOSFODNN7EXAMPLE⟧ from ~/.aws/credentials",
    "DEBUG: token refreshed, expires_in=3599, token_type=Bearer, scope=openid profile email",
    "ssn_last4: 6789, dob_year: 1990, zip: 02139",
    "Please call me back at ⟦PHONE|+44 (0)20 7946 0321⟧ or email ⟦EMAIL|oliver.b@example.co.uk⟧. Thanks!",
    "Mon Apr  1 09:15:02 UTC 2024 kernel: [12345.678901] eth0: link up, 1000 Mbps, full duplex",
    "Coordinates 37.7749, -122.4194; elevation 16 m; 12.5% grade; 3:45:10 elapsed",
    "openai.api_key = \"⟦API_KEY|sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7cDe0fGh3iJk6lMn9oPq2rSt5uVw8xYz1A⟧\"",
    "Refund issued to ⟦EMAIL|SUPPORT+REFUNDS@SHOP.EXAMPLE.COM⟧ for invoice INV-2024-00091 (amount 49.99 USD)",
    "lease ⟦IP_ADDRESS|10.1.2.3⟧? no: dhcp offered ⟦IP_ADDRESS|10.1.2.30⟧ to 3c:22:fb:aa:01:9e for 86400s",
    "db.users.find({email: \"⟦EMAIL|ann.lee@example.com⟧\"}) → { _id: ObjectId(\"65f1c2a9e4b0a1b2c3d4e5f6\"), phone: \"⟦PHONE|+1 415 555 0132⟧\" }",
    "Wire from ⟦IBAN|GB33 BUKB 2020 1555 5555 55⟧ received; ref 2024/03/000451",
    "ID check: SSN 000-12-3456 rejected (invalid area), SSN ⟦SSN|219-09-9999⟧ is the famous Woolworth card",
    "python -c 'import sys; print(sys.version)'  → 3.11.7 (main, Dec  8 2023, 18:56:58) [GCC 11.4.0]",
    "Temperature readings: 21.5, 21.7, 22.0, 22.4 at 10:00, 10:15, 10:30, 10:45",
    "ip route: default via ⟦IP_ADDRESS|192.168.0.1⟧ dev wlan0 proto dhcp metric 600",
    "Kontakt: ⟦PHONE|+41 44 668 18 00⟧, ⟦EMAIL|info@example.ch⟧, IBAN ⟦IBAN|CH93 0076 2011 6238 5295 7⟧",
    "Password reset requested for ⟦EMAIL|k.yamamoto@example.jp⟧ from ⟦IP_ADDRESS|2001:db8:3333:4444:5555:6666:7777:8888⟧",
    "export DATABASE_PASSWORD='⟦API_KEY|hJ7#kL2$mN9q⟧'\nexport DATABASE_USER=app",
    "npm notice New minor version of npm available! 10.2.4 -> 10.5.0",
    # Values wrapped over lines (textwrap, narrow columns), and lines that only look continued.
    "Kartennummer: ⟦CREDIT_CARD|4111 1111\n1111 1111⟧, gültig bis 12/29",
    "Beneficiary IBAN: ⟦IBAN|DE89 3704 0044\n    0532 0130 00⟧ (Gehalt März)",
    "Reach me at ⟦PHONE|+1 (415)\n555-0134⟧ after 6pm, or by mail",
    "pan ⟦CREDIT_CARD|4000 0566\n5566\n5556⟧ approved (auth 0x4f2a)",
    "  id   qty  price\n   0  4532   1234\n   1  5678   9012\n   2  3456   7890",
    "build 2024 1105\n2231 ok; next build 2024 1106",
    "Luhn: 4111 1111\n1111 1112 is not a card number",
    "DE89 3704 0044\n0532 0130 01 fails mod-97",
]


def handwritten_rows():
    rows = []
    for text in HANDWRITTEN:
        L = Line()
        rest = text
        while "⟦" in rest:
            before, after = rest.split("⟦", 1)
            inner, rest = after.split("⟧", 1)
            kind, value = inner.split("|", 1)
            L.add(before).add(value, kind)
        L.add(rest)
        rows.append(L.row())
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=20240515)
    ap.add_argument("--lines", type=int, default=800, help="generated lines (the hand-written ones come on top)")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "pii_corpus.jsonl"))
    args = ap.parse_args()
    rows = Gen(args.seed).generate(args.lines) + handwritten_rows()
    with open(args.out, "w", encoding="utf-8") as f:
        for row in rows:
            text = row["text"].encode()
            for s in row["spans"]:  # self-check: spans are on character boundaries
                text[s["start"]:s["end"]].decode()
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    counts = {}
    for row in rows:
        for s in row["spans"]:
            counts[s["type"]] = counts.get(s["type"], 0) + 1
    print(f"{len(rows)} lines -> {args.out}; spans: {dict(sorted(counts.items()))}")


if __name__ == "__main__":
    main()
