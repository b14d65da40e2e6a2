"""The OpenAPI document, completed with what FastAPI cannot see for itself.

Handlers parse their bodies by hand (strictly: ``bodies.json_body``), so the
document gets each body's model here, the bearer scheme every route but the
health check wants, and refusals documented as the JSON they are.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from ringleader.runtime.http import schemas
from ringleader.runtime.state.spec import JobSpec

REQUEST_BODIES: dict[tuple[str, str], type[BaseModel]] = {
    ("/jobs", "post"): JobSpec,
    ("/jobs/{job_id}", "patch"): schemas.PriorityChange,
    ("/users", "post"): schemas.NewUser,
}
"""Bodies the handlers parse by hand (strictly: ``bodies.json_body``), described for OpenAPI."""


def with_request_bodies(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with each hand-parsed body's schema, its models under ``components``,
    and every refusal documented as the JSON it is."""
    components = doc.setdefault("components", {}).setdefault("schemas", {})
    for (path, method), model in REQUEST_BODIES.items():
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        components.update(schema.pop("$defs", {}))
        components[model.__name__] = schema
        ref = {"$ref": f"#/components/schemas/{model.__name__}"}
        doc["paths"][path][method]["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": ref}},
        }
    # Every operation but the health check wants a bearer token (runtime/http/access.py).
    doc["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
    doc["security"] = [{"bearer": []}]
    doc["paths"]["/health"]["get"]["security"] = []
    # A route whose success is text (a log) still refuses in JSON, as every route does.
    for ops in doc["paths"].values():
        for op in ops.values():
            for code, response in op.get("responses", {}).items():
                content = response.get("content", {})
                if code[0] in "45" and "text/plain" in content:
                    content.setdefault("application/json", content.pop("text/plain"))
    return doc
