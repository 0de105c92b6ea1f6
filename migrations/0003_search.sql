CREATE VIRTUAL TABLE "restable_search_pets" USING fts5("name", content='pets', content_rowid='id', tokenize='unicode61 remove_diacritics 2');
--> statement-breakpoint
CREATE TRIGGER "restable_search_pets_insert" AFTER INSERT ON "pets" BEGIN INSERT INTO "restable_search_pets"(rowid, "name") VALUES (new."id", new."name"); END;
--> statement-breakpoint
CREATE TRIGGER "restable_search_pets_delete" AFTER DELETE ON "pets" BEGIN INSERT INTO "restable_search_pets"("restable_search_pets", rowid, "name") VALUES ('delete', old."id", old."name"); END;
--> statement-breakpoint
CREATE TRIGGER "restable_search_pets_update" AFTER UPDATE OF "id", "name" ON "pets" WHEN old."id" IS NOT new."id" OR old."name" IS NOT new."name" BEGIN INSERT INTO "restable_search_pets"("restable_search_pets", rowid, "name") VALUES ('delete', old."id", old."name"); INSERT INTO "restable_search_pets"(rowid, "name") VALUES (new."id", new."name"); END;
--> statement-breakpoint
INSERT INTO "restable_search_pets"("restable_search_pets") VALUES ('rebuild');
--> statement-breakpoint
CREATE VIRTUAL TABLE "restable_search_users" USING fts5("name", content='users', content_rowid='id', tokenize='unicode61 remove_diacritics 2');
--> statement-breakpoint
CREATE TRIGGER "restable_search_users_insert" AFTER INSERT ON "users" BEGIN INSERT INTO "restable_search_users"(rowid, "name") VALUES (new."id", new."name"); END;
--> statement-breakpoint
CREATE TRIGGER "restable_search_users_delete" AFTER DELETE ON "users" BEGIN INSERT INTO "restable_search_users"("restable_search_users", rowid, "name") VALUES ('delete', old."id", old."name"); END;
--> statement-breakpoint
CREATE TRIGGER "restable_search_users_update" AFTER UPDATE OF "id", "name" ON "users" WHEN old."id" IS NOT new."id" OR old."name" IS NOT new."name" BEGIN INSERT INTO "restable_search_users"("restable_search_users", rowid, "name") VALUES ('delete', old."id", old."name"); INSERT INTO "restable_search_users"(rowid, "name") VALUES (new."id", new."name"); END;
--> statement-breakpoint
INSERT INTO "restable_search_users"("restable_search_users") VALUES ('rebuild');
