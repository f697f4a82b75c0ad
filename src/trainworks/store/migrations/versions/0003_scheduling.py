"""scheduling: job priority, admitted zone and waiting reason

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("custom_jobs") as batch:
        batch.add_column(sa.Column("priority", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("zone", sa.String(length=128), nullable=True))
        batch.add_column(sa.Column("waiting_reason", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("custom_jobs") as batch:
        batch.drop_column("waiting_reason")
        batch.drop_column("zone")
        batch.drop_column("priority")
