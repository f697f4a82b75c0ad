"""training clusters (modelDevelopmentClusters) and replicas kept by a non-local backend

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "model_development_clusters",
        sa.Column("project_number", sa.String(length=20), nullable=False),
        sa.Column("location", sa.String(length=64), nullable=False),
        sa.Column("cluster_id", sa.String(length=10), nullable=False),
        sa.Column("uid", sa.BigInteger(), nullable=False),
        sa.Column("display_name", sa.String(length=512), nullable=False),
        sa.Column("state", sa.Integer(), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False, server_default=""),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("pending", sa.JSON(), nullable=True),
        sa.Column("realized", sa.JSON(), nullable=False),
        sa.Column("nodes", sa.JSON(), nullable=False),
        sa.Column("events", sa.JSON(), nullable=False),
        sa.Column("slurm_port", sa.Integer(), nullable=False),
        sa.Column("error", sa.JSON(), nullable=True),
        sa.Column("operation_id", sa.BigInteger(), nullable=True),
        sa.Column("create_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("update_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("start_time", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("project_number", "location", "cluster_id"),
        sa.UniqueConstraint("uid"),
        sa.UniqueConstraint("slurm_port"),
    )
    with op.batch_alter_table("model_development_clusters") as batch:
        batch.create_index("ix_model_development_clusters_state", ["state"], unique=False)
    with op.batch_alter_table("replicas") as batch:
        batch.add_column(sa.Column("backend_ref", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("replicas") as batch:
        batch.drop_column("backend_ref")
    with op.batch_alter_table("model_development_clusters") as batch:
        batch.drop_index("ix_model_development_clusters_state")
    op.drop_table("model_development_clusters")
