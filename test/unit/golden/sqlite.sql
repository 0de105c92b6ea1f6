-- get users 1
select "id" as "id", "name" as "name", "email" as "email", "created_at" as "createdAt", "updated_at" as "updatedAt" from "users" where "users"."id" = ?

-- get pet_tags [1, good] (composite key)
select "pet_id" as "petId", "label" as "label", "note" as "note" from "pet_tags" where ("pet_tags"."pet_id" = ? and "pet_tags"."label" = ?)

-- exists users 1
select 1 from "users" where "users"."id" = ?

-- create users (one)
PRAGMA busy_timeout = 0
insert into "users" ("id", "name", "email", "created_at", "updated_at") values (null, ?, ?, ?, ?) returning "id" as "id", "name" as "name", "email" as "email", "created_at" as "createdAt", "updated_at" as "updatedAt"
PRAGMA busy_timeout = 5000

-- create pets (bulk of 2)
PRAGMA busy_timeout = 0
insert into "pets" ("id", "name", "species", "owner_id", "created_at", "updated_at") values (null, ?, ?, ?, ?, ?), (null, ?, ?, ?, ?, ?) returning "id" as "id", "name" as "name", "species" as "species", "owner_id" as "ownerId", "created_at" as "createdAt", "updated_at" as "updatedAt"
PRAGMA busy_timeout = 5000

-- update users 1 (merge)
PRAGMA busy_timeout = 0
select "id" as "id", "name" as "name", "email" as "email", "created_at" as "createdAt", "updated_at" as "updatedAt" from "users" where "users"."id" = ?
update "users" set "name" = ?, "email" = ?, "updated_at" = ? where "users"."id" = ? returning "id" as "id", "name" as "name", "email" as "email", "created_at" as "createdAt", "updated_at" as "updatedAt"
PRAGMA busy_timeout = 5000

-- remove pets 8
PRAGMA busy_timeout = 0
select "id" as "id", "name" as "name", "species" as "species", "owner_id" as "ownerId", "created_at" as "createdAt", "updated_at" as "updatedAt" from "pets" where "pets"."id" = ?
delete from "pets" where "pets"."id" = ?
PRAGMA busy_timeout = 5000

-- update orders 1 (replace: the fields left out take their defaults)
PRAGMA busy_timeout = 0
select "id" as "id", "user_id" as "userId", "pet_id" as "petId", "status" as "status", "quantity" as "quantity", "created_at" as "createdAt", "updated_at" as "updatedAt" from "orders" where "orders"."id" = ?
update "orders" set "user_id" = ?, "pet_id" = ?, "status" = ?, "quantity" = ?, "updated_at" = ? where "orders"."id" = ? returning "id" as "id", "user_id" as "userId", "pet_id" as "petId", "status" as "status", "quantity" as "quantity", "created_at" as "createdAt", "updated_at" as "updatedAt"
PRAGMA busy_timeout = 5000

-- remove users 3 (its pets set to no owner)
PRAGMA busy_timeout = 0
select "id" as "id", "name" as "name", "email" as "email", "created_at" as "createdAt", "updated_at" as "updatedAt" from "users" where "users"."id" = ?
delete from "users" where "users"."id" = ?
PRAGMA busy_timeout = 5000

-- create users with a taken email (refused: conflict)
PRAGMA busy_timeout = 0
insert into "users" ("id", "name", "email", "created_at", "updated_at") values (null, ?, ?, ?, ?) returning "id" as "id", "name" as "name", "email" as "email", "created_at" as "createdAt", "updated_at" as "updatedAt"
PRAGMA busy_timeout = 5000

-- create pets with a missing owner (refused: unprocessable)
PRAGMA busy_timeout = 0
insert into "pets" ("id", "name", "species", "owner_id", "created_at", "updated_at") values (null, ?, ?, ?, ?, ?) returning "id" as "id", "name" as "name", "species" as "species", "owner_id" as "ownerId", "created_at" as "createdAt", "updated_at" as "updatedAt"
select 1 from "users" where "users"."id" = ?
PRAGMA busy_timeout = 5000

-- remove users 2 still referenced by an order (refused: conflict)
PRAGMA busy_timeout = 0
select "id" as "id", "name" as "name", "email" as "email", "created_at" as "createdAt", "updated_at" as "updatedAt" from "users" where "users"."id" = ?
delete from "users" where "users"."id" = ?
PRAGMA busy_timeout = 5000

-- list pets first page limit=2
select "id" as "id", "name" as "name", "species" as "species", "owner_id" as "ownerId", "created_at" as "createdAt", "updated_at" as "updatedAt" from "pets" order by "pets"."id" asc limit 3

-- list pets species=cat
select "id" as "id", "name" as "name", "species" as "species", "owner_id" as "ownerId", "created_at" as "createdAt", "updated_at" as "updatedAt" from "pets" where "pets"."species" = ? order by "pets"."id" asc limit 101

-- list pets species[ne]=cat
select "id" as "id", "name" as "name", "species" as "species", "owner_id" as "ownerId", "created_at" as "createdAt", "updated_at" as "updatedAt" from "pets" where "pets"."species" IS DISTINCT FROM ? order by "pets"."id" asc limit 101

-- list pets id[gt]=2
select "id" as "id", "name" as "name", "species" as "species", "owner_id" as "ownerId", "created_at" as "createdAt", "updated_at" as "updatedAt" from "pets" where "pets"."id" > ? order by "pets"."id" asc limit 101

-- list pets species[in]=bird,fish
select "id" as "id", "name" as "name", "species" as "species", "owner_id" as "ownerId", "created_at" as "createdAt", "updated_at" as "updatedAt" from "pets" where "pets"."species" in (?, ?) order by "pets"."id" asc limit 101

-- list pets name[contains]=ex
select "id" as "id", "name" as "name", "species" as "species", "owner_id" as "ownerId", "created_at" as "createdAt", "updated_at" as "updatedAt" from "pets" where instr("pets"."name", ?) > 0 order by "pets"."id" asc limit 101

-- list pets name[startsWith]=Re
select "id" as "id", "name" as "name", "species" as "species", "owner_id" as "ownerId", "created_at" as "createdAt", "updated_at" as "updatedAt" from "pets" where instr("pets"."name", ?) = 1 order by "pets"."id" asc limit 101

-- list pets ownerId[null]=true
select "id" as "id", "name" as "name", "species" as "species", "owner_id" as "ownerId", "created_at" as "createdAt", "updated_at" as "updatedAt" from "pets" where "pets"."owner_id" is null order by "pets"."id" asc limit 101

-- list pets species=dog&ownerId[ne]=1&name[startsWith]=R
select "id" as "id", "name" as "name", "species" as "species", "owner_id" as "ownerId", "created_at" as "createdAt", "updated_at" as "updatedAt" from "pets" where ("pets"."species" = ? and "pets"."owner_id" IS DISTINCT FROM ? and instr("pets"."name", ?) = 1) order by "pets"."id" asc limit 101

-- list pets sort=species,-name
select "id" as "id", "name" as "name", "species" as "species", "owner_id" as "ownerId", "created_at" as "createdAt", "updated_at" as "updatedAt" from "pets" order by "pets"."species" asc, "pets"."name" desc, "pets"."id" asc limit 101

-- list pets sort=species,-name limit=2, second page by cursor
select "id" as "id", "name" as "name", "species" as "species", "owner_id" as "ownerId", "created_at" as "createdAt", "updated_at" as "updatedAt" from "pets" where ("pets"."species" > ? or ("pets"."species" IS NOT DISTINCT FROM ? and "pets"."name" < ?) or ("pets"."species" IS NOT DISTINCT FROM ? and "pets"."name" IS NOT DISTINCT FROM ? and "pets"."id" > ?)) order by "pets"."species" asc, "pets"."name" desc, "pets"."id" asc limit 3

-- list pets count=true species=cat limit=1
select "id" as "id", "name" as "name", "species" as "species", "owner_id" as "ownerId", "created_at" as "createdAt", "updated_at" as "updatedAt" from "pets" where "pets"."species" = ? order by "pets"."id" asc limit 2
select count(*) from "pets" where "pets"."species" = ?

-- list pets under users 1 (related list)
select "id" as "id", "name" as "name", "species" as "species", "owner_id" as "ownerId", "created_at" as "createdAt", "updated_at" as "updatedAt" from "pets" where ("pets"."owner_id" = ? and exists (select 1 from "users" where "id" = ?)) order by "pets"."id" asc limit 101

-- list pet_tags under pets 1 (related list of a composite key)
select "pet_id" as "petId", "label" as "label", "note" as "note" from "pet_tags" where ("pet_tags"."pet_id" = ? and exists (select 1 from "pets" where "id" = ?)) order by "pet_tags"."pet_id" asc, "pet_tags"."label" asc limit 101

-- withKeys users [2, 1, 99] (expand to-one)
select "id" as "id", "name" as "name", "email" as "email", "created_at" as "createdAt", "updated_at" as "updatedAt" from "users" where "users"."id" IN (SELECT value FROM json_each(?))

-- withParents pets ownerId [2, 1, 3] cap 1 (expand to-many)
select "id", "name", "species", "ownerId", "createdAt", "updatedAt" from (select "id" as "id", "name" as "name", "species" as "species", "owner_id" as "ownerId", "created_at" as "createdAt", "updated_at" as "updatedAt", row_number() OVER (PARTITION BY "owner_id" ORDER BY "pets"."id") as "__n" from "pets" where "pets"."owner_id" IN (SELECT value FROM json_each(?))) "ranked" where "__n" <= ? order by "ownerId", "id"

-- list users q=ada (search)
select "users"."id" as "id", "users"."name" as "name", "users"."email" as "email", "users"."created_at" as "createdAt", "users"."updated_at" as "updatedAt" from "users" inner join "restable_search_users" on "restable_search_users"."rowid" = "users"."id" where "restable_search_users" MATCH ? order by "restable_search_users"."rowid" ASC limit 101

-- list users q=ad name[startsWith]=Ad (search with a filter)
select "users"."id" as "id", "users"."name" as "name", "users"."email" as "email", "users"."created_at" as "createdAt", "users"."updated_at" as "updatedAt" from "users" inner join "restable_search_users" on "restable_search_users"."rowid" = "users"."id" where (instr("users"."name", ?) = 1 and "restable_search_users" MATCH ?) order by "restable_search_users"."rowid" ASC limit 101

-- list users q=a sort=relevance count=true (search by rank)
select "users"."id" as "id", "users"."name" as "name", "users"."email" as "email", "users"."created_at" as "createdAt", "users"."updated_at" as "updatedAt", "restable_search_users"."rank" as "__rank" from "users" inner join "restable_search_users" on "restable_search_users"."rowid" = "users"."id" where "restable_search_users" MATCH ? order by "restable_search_users"."rank" ASC, "restable_search_users"."rowid" ASC limit 101
select count(*) from "users" inner join "restable_search_users" on "restable_search_users"."rowid" = "users"."id" where "restable_search_users" MATCH ?

-- create users with an Idempotency-Key
PRAGMA busy_timeout = 0
select "fingerprint", "status", "headers", "body" from "restable_idempotency_keys" where ("restable_idempotency_keys"."key" = ? and "restable_idempotency_keys"."created_at" > ?)
insert into "users" ("id", "name", "email", "created_at", "updated_at") values (null, ?, ?, ?, ?) returning "id" as "id", "name" as "name", "email" as "email", "created_at" as "createdAt", "updated_at" as "updatedAt"
insert into "restable_idempotency_keys" ("key", "fingerprint", "status", "headers", "body", "created_at") values (?, ?, ?, ?, ?, ?) on conflict ("restable_idempotency_keys"."key") do update set "fingerprint" = ?, "status" = ?, "headers" = ?, "body" = ?, "created_at" = ?
PRAGMA busy_timeout = 5000

-- create users with the same Idempotency-Key again (replayed)
PRAGMA busy_timeout = 0
select "fingerprint", "status", "headers", "body" from "restable_idempotency_keys" where ("restable_idempotency_keys"."key" = ? and "restable_idempotency_keys"."created_at" > ?)
PRAGMA busy_timeout = 5000

-- batch: create users with an Idempotency-Key
PRAGMA busy_timeout = 0
select "fingerprint", "status", "headers", "body" from "restable_idempotency_keys" where ("restable_idempotency_keys"."key" = ? and "restable_idempotency_keys"."created_at" > ?)
insert into "users" ("id", "name", "email", "created_at", "updated_at") values (null, ?, ?, ?, ?) returning "id" as "id", "name" as "name", "email" as "email", "created_at" as "createdAt", "updated_at" as "updatedAt"
insert into "restable_idempotency_keys" ("key", "fingerprint", "status", "headers", "body", "created_at") values (?, ?, ?, ?, ?, ?) on conflict ("restable_idempotency_keys"."key") do update set "fingerprint" = ?, "status" = ?, "headers" = ?, "body" = ?, "created_at" = ?
PRAGMA busy_timeout = 5000

-- purge expired Idempotency-Keys
PRAGMA busy_timeout = 0
delete from "restable_idempotency_keys" where "restable_idempotency_keys"."key" in (select "key" from "restable_idempotency_keys" where "restable_idempotency_keys"."created_at" <= ? limit ?)
PRAGMA busy_timeout = 5000
