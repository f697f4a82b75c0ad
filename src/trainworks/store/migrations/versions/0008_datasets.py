"""managed datasets

Revision ID: 0008
Revises: 0007
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "datasets",
        sa.Column("id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("project_number", sa.String(length=20), nullable=False),
        sa.Column("location", sa.String(length=64), nullable=False),
        sa.Column("display_name", sa.String(length=512), nullable=False),
        sa.Column("metadata_schema_uri", sa.Text(), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("data_format", sa.String(length=16), nullable=False),
        sa.Column("item_count", sa.BigInteger(), nullable=False),
        sa.Column("columns", sa.JSON(), nullable=True),
        sa.Column("data_path", sa.Text(), nullable=True),
        sa.Column("create_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("update_time", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("datasets") as batch:
        batch.create_index(
            "ix_datasets_parent_created", ["project_number", "location", "create_time", "id"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("datasets") as batch:
        batch.drop_index("ix_datasets_parent_created")
    op.drop_table("datasets")
