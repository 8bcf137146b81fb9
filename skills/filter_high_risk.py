"""filter_high_risk: keep the vulnerabilities whose severity is 'high' or 'critical'.

Usage:
    from skills import filter_high_risk
    urgent = filter_high_risk(vulns)

`vulns` is a list of dicts with a 'severity' key, e.g. parsed from a scanner's JSON report.
The comparison is exact and case-sensitive, as in the original skill: 'High' or 'CRITICAL'
do not match, and an item without 'severity' raises KeyError.
"""


def filter_high_risk(vulns):
    """Return the items of `vulns` whose 'severity' is 'high' or 'critical', in order."""
    return [v for v in vulns if v['severity'] in ['high', 'critical']]
