//! The PostgreSQL + pgvector backend (being built).
