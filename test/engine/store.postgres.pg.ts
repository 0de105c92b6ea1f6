// The store conformance cases (store.case.ts) on the PostgreSQL store: a fresh database of
// TEST_DATABASE_URL's server per case (`node test/run.mjs pg` starts one), migrated as the app migrates it.
import { openPostgresEngine, requirePostgres } from '../support/engine.js';
import { storeCases } from './store.case.js';

requirePostgres();
storeCases('PostgreSQL', () => openPostgresEngine());
