"""tuning jobs and trials

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02 16:00:39.896187
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tuning_jobs",
        sa.Column("id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("project_number", sa.String(length=20), nullable=False),
        sa.Column("location", sa.String(length=64), nullable=False),
        sa.Column("display_name", sa.String(length=512), nullable=False),
        sa.Column("state", sa.Integer(), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("error", sa.JSON(), nullable=True),
        sa.Column("create_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("update_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("start_time", sa.DateTime(timezone=True), nullable=True),
        sa.Column("end_time", sa.DateTime(timezone=True), nullable=True),
        sa.Column("outcome", sa.JSON(), nullable=True),
        sa.Column("delete_operation_id", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("tuning_jobs", schema=None) as batch_op:
        batch_op.create_index(
            "ix_tuning_jobs_parent_created", ["project_number", "location", "create_time", "id"], unique=False
        )
        batch_op.create_index("ix_tuning_jobs_state", ["state"], unique=False)

    op.create_table(
        "tuning_trials",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("tuning_job_id", sa.BigInteger(), nullable=False),
        sa.Column("trial_id", sa.Integer(), nullable=False),
        sa.Column("study_number", sa.Integer(), nullable=False),
        sa.Column("state", sa.Integer(), nullable=False),
        sa.Column("parameters", sa.JSON(), nullable=False),
        sa.Column("args", sa.JSON(), nullable=False),
        sa.Column("custom_job_id", sa.BigInteger(), nullable=True),
        sa.Column("measurements", sa.JSON(), nullable=False),
        sa.Column("final_measurement", sa.JSON(), nullable=True),
        sa.Column("infeasible_reason", sa.Text(), nullable=True),
        sa.Column("stopped_early", sa.Boolean(), nullable=False),
        sa.Column("start_time", sa.DateTime(timezone=True), nullable=True),
        sa.Column("end_time", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["tuning_job_id"], ["tuning_jobs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("tuning_job_id", "study_number", name="uq_tuning_trials_study_number"),
        sa.UniqueConstraint("tuning_job_id", "trial_id", name="uq_tuning_trials_trial"),
    )
    with op.batch_alter_table("tuning_trials", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_tuning_trials_tuning_job_id"), ["tuning_job_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("tuning_trials", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_tuning_trials_tuning_job_id"))

    op.drop_table("tuning_trials")
    with op.batch_alter_table("tuning_jobs", schema=None) as batch_op:
        batch_op.drop_index("ix_tuning_jobs_state")
        batch_op.drop_index("ix_tuning_jobs_parent_created")

    op.drop_table("tuning_jobs")
