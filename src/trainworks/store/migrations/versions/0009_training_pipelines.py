"""training pipelines

Revision ID: 0009
Revises: 0008
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "training_pipelines",
        sa.Column("id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("project_number", sa.String(length=20), nullable=False),
        sa.Column("location", sa.String(length=64), nullable=False),
        sa.Column("display_name", sa.String(length=512), nullable=False),
        sa.Column("state", sa.Integer(), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("error", sa.JSON(), nullable=True),
        sa.Column("backing_kind", sa.String(length=16), nullable=True),
        sa.Column("backing_id", sa.BigInteger(), nullable=True),
        sa.Column("export", sa.JSON(), nullable=True),
        sa.Column("model", sa.JSON(), nullable=True),
        sa.Column("create_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("update_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("start_time", sa.DateTime(timezone=True), nullable=True),
        sa.Column("end_time", sa.DateTime(timezone=True), nullable=True),
        sa.Column("delete_operation_id", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("training_pipelines") as batch:
        batch.create_index(
            "ix_training_pipelines_parent_created",
            ["project_number", "location", "create_time", "id"],
            unique=False,
        )
        batch.create_index("ix_training_pipelines_state", ["state"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("training_pipelines") as batch:
        batch.drop_index("ix_training_pipelines_state")
        batch.drop_index("ix_training_pipelines_parent_created")
    op.drop_table("training_pipelines")
