"""restarts: job attempts and history, replica attempts, restarts and preemption requests

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("custom_jobs") as batch:
        batch.add_column(sa.Column("attempt", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("history", sa.JSON(), nullable=False, server_default="[]"))
    with op.batch_alter_table("replicas") as batch:
        batch.add_column(sa.Column("attempt", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("restarts", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("preempt_requested", sa.Boolean(), nullable=False, server_default="false"))


def downgrade() -> None:
    with op.batch_alter_table("replicas") as batch:
        batch.drop_column("preempt_requested")
        batch.drop_column("restarts")
        batch.drop_column("attempt")
    with op.batch_alter_table("custom_jobs") as batch:
        batch.drop_column("history")
        batch.drop_column("attempt")
