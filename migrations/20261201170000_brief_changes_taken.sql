-- How many queued changes of each brief have been taken off the change queue
-- (`brief_signals_dirty`). Taken in the same statement that deletes them, so for any snapshot of
-- the database `taken + rows still queued` counts every committed write that can change the
-- brief's review. The review API keeps the JSON it computed under that count and serves it again
-- while the count has not moved (`review::api`).
CREATE TABLE brief_changes_taken (
    brief_id uuid PRIMARY KEY,
    taken    bigint NOT NULL
);
