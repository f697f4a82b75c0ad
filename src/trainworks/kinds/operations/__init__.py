"""Operations."""
