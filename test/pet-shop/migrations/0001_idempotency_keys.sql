CREATE TABLE `restable_idempotency_keys` (
	`key` text PRIMARY KEY NOT NULL,
	`fingerprint` text NOT NULL,
	`status` integer NOT NULL,
	`headers` text NOT NULL,
	`body` text NOT NULL,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `restable_idempotency_keys_created_at_idx` ON `restable_idempotency_keys` (`created_at`);