// The server's filter schema (what GET /v1/schema answers, written by
// //server/http:schema_json), made the page's fields as main.mjs does.
import { readFileSync } from 'node:fs';
import { fieldsFromSchema, setFilterFields } from '../web/filters.mjs';

export const SCHEMA = JSON.parse(readFileSync(process.env.ARGSDUMP_SCHEMA_JSON, 'utf8'));
export const FIELDS = fieldsFromSchema(SCHEMA.filter);
setFilterFields(FIELDS);
