#!/usr/bin/env python3
"""Rebuild tools_registry/<category>.json from the shared MCP tool catalog.

Usage: python3 tools_registry/build_from_catalog.py PATH/TO/catalog.jsonl [OUT_DIR]

Reads catalog.jsonl (one tool per line: server, category, name, description,
input_schema, source) and writes one file per category in the registry format
documented in tools_registry/README.md:

    {"categories": {"<category>": {"description": "...",
        "tools": {"<server>/<name>": {"name", "description", "mcp_server",
                                      "functions", "use_cases", "input_schema"}}}}}

`functions` is the tool's own name; `use_cases` stays empty because the catalog
has nothing honest to fill it with. Output is deterministic (tools sorted by
id, schemas kept in their published key order), so re-running on the same
catalog gives byte-identical files. Standard library only.
"""

import json
import os
import sys

# One line per category: what an agent would look there for.
CATEGORY_DESCRIPTIONS = {
    "ai-agents": "Agent infrastructure: multi-agent coordination, reasoning aids, model routing, agent directories and human-in-the-loop handoffs",
    "browser-automation": "Drive a real web browser: navigate, click, type, fill forms, take screenshots and run scripts in pages",
    "business": "Business operations: CRM and ERP records, company lookups, invoices, help desks, hiring, tenders and trade classification",
    "cloud": "Cloud platforms and their resources: data platforms, compute, storage, deployments and local cloud emulators",
    "communication": "Send and read messages: email, SMS, Slack, Discord and WhatsApp",
    "data-analytics": "Analytics and data pipelines: product analytics, dbt models, metrics, dashboards and data-quality checks",
    "databases": "Query and manage databases: SQL (Postgres, MySQL, SQLite, ClickHouse), Redis, Neo4j graphs and vector stores",
    "developer-tools": "Software development: GitHub and GitLab repositories, issues and pull requests, library docs, code analysis, UI components and package info",
    "devops": "Operate infrastructure: containers, Kubernetes, CI/CD pipelines, error monitoring, infrastructure as code and system processes",
    "documents": "Read, create and convert documents: PDF, Word, Excel and Google Sheets, CSV, PowerPoint slides and OCR",
    "ecommerce": "Online shopping and retail: product search, prices, electronic components, orders and wishlists",
    "entertainment": "Games and fun: chess, game stats and databases, trading cards, Pokemon and game engines",
    "files": "Work with files and folders: local filesystems, cloud drives (Box, Google Drive), reading, writing, editing and searching files",
    "finance": "Money and markets: stock quotes and history, crypto prices, exchange rates, economic data, payments and wallets",
    "health-science": "Health and life science: medicines, clinical trials, genes, variants and biomedical literature",
    "home-iot": "Smart home control: Home Assistant devices, sensors, automations and scenes",
    "legal-compliance": "Law and compliance: court cases and citations, regulations, privacy and security compliance frameworks",
    "lifestyle": "Everyday life: recipes and cooking, astrology and fortune telling",
    "maps-travel": "Places and travel: maps, geocoding, directions, flights, trains, hotels and holiday rentals",
    "media": "Images, audio and video: generation, editing, conversion, compression, transcription, music and media libraries",
    "memory-knowledge": "Long-term memory and knowledge bases for agents: store, recall and search notes, facts, entities and documents",
    "news": "News and trends: headlines, Hacker News stories and trending topics",
    "productivity": "Work management: tasks, projects, issues, wikis and notes (Notion, Atlassian, Google Workspace), calendars and time tracking",
    "research-reference": "Reference and research: academic papers (arXiv), Wikipedia, open government data, museum collections, weather and science",
    "search-web": "Search the web and fetch pages: web search engines, page fetching, scraping, HTML to Markdown and sitemaps",
    "security": "Security: identity and access management, secrets, threat detection, vulnerability scanning, network and domain intelligence",
    "social": "Social networks: Reddit posts and comments, X/Twitter and social feeds",
    "utilities": "General utilities: calculators and math, time and time zones, random numbers and small conversions",
    "visualization": "Make visuals: charts and graphs, Mermaid diagrams and mind maps",
}


def tool_entry(row):
    return {
        "name": row["name"],
        "description": row.get("description") or "",
        "mcp_server": row["server"],
        "functions": [row["name"]],
        "use_cases": [],
        "input_schema": row.get("input_schema"),
    }


def main(argv):
    if len(argv) not in (2, 3):
        sys.exit(__doc__.split("\n\n")[1])
    src = argv[1]
    out_dir = argv[2] if len(argv) == 3 else os.path.dirname(os.path.abspath(__file__))
    by_category = {}
    with open(src, encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            row = json.loads(line)
            category = row["category"]
            if category not in CATEGORY_DESCRIPTIONS:
                sys.exit(f"{src}:{line_no}: category {category!r} has no description in this script")
            tools = by_category.setdefault(category, {})
            tool_id = f'{row["server"]}/{row["name"]}'
            if tool_id in tools:
                sys.exit(f"{src}:{line_no}: duplicate tool id {tool_id!r}")
            tools[tool_id] = tool_entry(row)
    for category, tools in sorted(by_category.items()):
        tools = {tool_id: tools[tool_id] for tool_id in sorted(tools)}
        doc = {"categories": {category: {"description": CATEGORY_DESCRIPTIONS[category], "tools": tools}}}
        path = os.path.join(out_dir, f"{category}.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(doc, f, ensure_ascii=False, indent=1)
            f.write("\n")
    total = sum(len(t) for t in by_category.values())
    print(f"wrote {len(by_category)} category files, {total} tools, to {out_dir}")


if __name__ == "__main__":
    main(sys.argv)
