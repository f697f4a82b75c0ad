"""persistent resources and their billing spans

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "persistent_resources",
        sa.Column("project_number", sa.String(length=20), nullable=False),
        sa.Column("location", sa.String(length=64), nullable=False),
        sa.Column("resource_id", sa.String(length=63), nullable=False),
        sa.Column("uid", sa.BigInteger(), nullable=False),
        sa.Column("display_name", sa.String(length=512), nullable=False),
        sa.Column("state", sa.Integer(), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("pending_spec", sa.JSON(), nullable=True),
        sa.Column("error", sa.JSON(), nullable=True),
        sa.Column("operation_id", sa.BigInteger(), nullable=True),
        sa.Column("generation", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("create_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("update_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("start_time", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("project_number", "location", "resource_id"),
        sa.UniqueConstraint("uid"),
    )
    with op.batch_alter_table("persistent_resources") as batch:
        batch.create_index("ix_persistent_resources_state", ["state"], unique=False)

    op.create_table(
        "persistent_resource_spans",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("project_number", sa.String(length=20), nullable=False),
        sa.Column("location", sa.String(length=64), nullable=False),
        sa.Column("resource_id", sa.String(length=63), nullable=False),
        sa.Column("resource_uid", sa.BigInteger(), nullable=False),
        sa.Column("display_name", sa.String(length=512), nullable=False),
        sa.Column("pool_id", sa.String(length=63), nullable=False),
        sa.Column("machine_spec", sa.JSON(), nullable=False),
        sa.Column("machines", sa.Integer(), nullable=False),
        sa.Column("start_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("end_time", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("persistent_resource_spans") as batch:
        batch.create_index(
            "ix_persistent_resource_spans_parent", ["project_number", "location"], unique=False
        )
        batch.create_index(
            batch.f("ix_persistent_resource_spans_resource_uid"), ["resource_uid"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("persistent_resource_spans") as batch:
        batch.drop_index(batch.f("ix_persistent_resource_spans_resource_uid"))
        batch.drop_index("ix_persistent_resource_spans_parent")
    op.drop_table("persistent_resource_spans")
    with op.batch_alter_table("persistent_resources") as batch:
        batch.drop_index("ix_persistent_resources_state")
    op.drop_table("persistent_resources")
