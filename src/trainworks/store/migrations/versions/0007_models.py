"""model registry: models and their versions

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "models",
        sa.Column("project_number", sa.String(length=20), nullable=False),
        sa.Column("location", sa.String(length=64), nullable=False),
        sa.Column("model_id", sa.String(length=128), nullable=False),
        sa.Column("next_version", sa.Integer(), nullable=False),
        sa.Column("default_version", sa.Integer(), nullable=False),
        sa.Column("create_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("update_time", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("project_number", "location", "model_id"),
    )
    op.create_table(
        "model_versions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("project_number", sa.String(length=20), nullable=False),
        sa.Column("location", sa.String(length=64), nullable=False),
        sa.Column("model_id", sa.String(length=128), nullable=False),
        sa.Column("version_id", sa.Integer(), nullable=False),
        sa.Column("display_name", sa.String(length=512), nullable=False),
        sa.Column("aliases", sa.JSON(), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("artifact_path", sa.Text(), nullable=True),
        sa.Column("artifact_format", sa.String(length=32), nullable=True),
        sa.Column("training_pipeline", sa.Text(), nullable=True),
        sa.Column("create_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("update_time", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("project_number", "location", "model_id", "version_id", name="uq_model_versions"),
    )
    with op.batch_alter_table("model_versions") as batch:
        batch.create_index(
            "ix_model_versions_model", ["project_number", "location", "model_id"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("model_versions") as batch:
        batch.drop_index("ix_model_versions_model")
    op.drop_table("model_versions")
    op.drop_table("models")
