"""persistent resource jobs: custom_jobs.persistent_resource (jobSpec.persistentResourceId), indexed

Revision ID: 0013
Revises: 0012
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

# jobSpec.persistentResourceId of the stored spec (a JSON column on both).
RESOURCE_ID = {
    "sqlite": "json_extract(spec, '$.jobSpec.persistentResourceId')",
    "postgresql": "spec -> 'jobSpec' ->> 'persistentResourceId'",
}


def upgrade() -> None:
    op.add_column("custom_jobs", sa.Column("persistent_resource", sa.String(length=63), nullable=True))
    # The jobs stored so far: the spec never changes, so one copy now stays right.
    resource_id = RESOURCE_ID[op.get_bind().dialect.name]
    op.execute(f"UPDATE custom_jobs SET persistent_resource = NULLIF({resource_id}, '')")
    op.create_index("ix_custom_jobs_persistent_resource", "custom_jobs", ["persistent_resource"])


def downgrade() -> None:
    op.drop_index("ix_custom_jobs_persistent_resource", table_name="custom_jobs")
    op.drop_column("custom_jobs", "persistent_resource")
