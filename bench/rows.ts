// The SQLite database every benchmark server is measured on: migrated by the build that serves it,
// then users and as many pets, each user owning one (pet i belongs to a user spread over the table).
import { execFileSync } from 'node:child_process';
import Database from 'better-sqlite3';

/** Migrates `file` with the compiled migrate command of the install in `dir` (its own migrations). */
export function migrate(dir: string, file: string): void {
  execFileSync(process.execPath, ['dist/cli/migrate.js'], {
    cwd: dir,
    env: { PATH: process.env.PATH, DATABASE_PATH: file },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
}

/** Inserts `count` users and `count` pets into the migrated database `file`; returns them as json-server's db.json holds them. */
export function insertRows(file: string, count: number, now: string): { users: object[]; pets: object[] } {
  const sqlite = new Database(file);
  const users: object[] = [];
  const pets: object[] = [];
  const addUser = sqlite.prepare('INSERT INTO users (name, email, created_at, updated_at) VALUES (?, ?, ?, ?)');
  const addPet = sqlite.prepare('INSERT INTO pets (name, species, owner_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?)');
  sqlite.transaction(() => {
    for (let id = 1; id <= count; id++) {
      addUser.run(`user ${id}`, `user${id}@example.com`, now, now);
      users.push({ id, name: `user ${id}`, email: `user${id}@example.com`, createdAt: now, updatedAt: now });
    }
    for (let id = 1; id <= count; id++) {
      const owner = 1 + ((id * 7919) % count);
      addPet.run(`pet ${id}`, 'dog', owner, now, now);
      pets.push({ id, name: `pet ${id}`, species: 'dog', userId: owner, createdAt: now, updatedAt: now });
    }
  })();
  sqlite.close();
  return { users, pets };
}
