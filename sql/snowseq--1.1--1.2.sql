/* snowseq--1.1--1.2.sql: upgrade of the snowseq extension from 1.1 to 1.2 */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION snowseq UPDATE TO '1.2'" to load this file. \quit
