/* snowseq--1.2--1.3.sql: upgrade of the snowseq extension from 1.2 to 1.3 */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION snowseq UPDATE TO '1.3'" to load this file. \quit

-- Each change of 1.3 is a section of its own, marked
-- "-- ---- <part>: <what> (1.3) ----", in the same order as in
-- snowseq--1.3.sql.
