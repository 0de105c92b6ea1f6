// The store conformance cases (store.case.ts) on the SQLite store: a fresh temporary file per case,
// migrated and opened as the app opens it.
import { openSqliteEngine } from '../support/engine.js';
import { storeCases } from './store.case.js';

storeCases('SQLite', () => openSqliteEngine());
