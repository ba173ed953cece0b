"""What the MCP and the A2A suites both do through tools: the catalog decides which flows run."""

DEAL_TOOLS = ("svc_create_pipeline", "svc_create_deal", "svc_get_deal")


def has_deals(operations: dict) -> bool:
    """Pipelines and deals are tools once the catalog has them; until then their flow cannot run."""
    return all(name in operations for name in DEAL_TOOLS)


def pipeline_arguments(unique: str) -> dict:
    return {
        "key": f"agents_{unique}",
        "name": f"Agents {unique}",
        "stages": ["new", {"key": "won", "label": "Won", "type": "won"}, {"key": "lost", "label": "Lost", "type": "lost"}],
    }


def deal_arguments(unique: str, contact_id: str, company_id: str) -> dict:
    return {
        "title": f"Deal {unique}",
        "pipeline": f"agents_{unique}",
        "stage": "new",
        "primary_contact_id": contact_id,
        "company_id": company_id,
        "value_cents": 125000,
        "currency": "EUR",
    }

