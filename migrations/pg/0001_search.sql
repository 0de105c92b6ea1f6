CREATE EXTENSION IF NOT EXISTS unaccent;
--> statement-breakpoint
CREATE OR REPLACE FUNCTION restable_search_words(text) RETURNS tsvector LANGUAGE sql IMMUTABLE PARALLEL SAFE RETURN to_tsvector('simple'::regconfig, translate(unaccent($1), '!"#$%&''()*+,-./:;<=>?@[\]^_`{|}~', repeat(' ', 32)));
--> statement-breakpoint
ALTER TABLE "pets" ADD COLUMN "restable_search" tsvector GENERATED ALWAYS AS (restable_search_words(coalesce("name", ''))) STORED;
--> statement-breakpoint
CREATE INDEX "restable_search_pets" ON "pets" USING gin ("restable_search");
--> statement-breakpoint
ALTER TABLE "users" ADD COLUMN "restable_search" tsvector GENERATED ALWAYS AS (restable_search_words(coalesce("name", ''))) STORED;
--> statement-breakpoint
CREATE INDEX "restable_search_users" ON "users" USING gin ("restable_search");
