/**
 * The README's least-privilege ACL for the console: the same rules (the README gives them over several `ACL SETUSER
 * lockscope` lines, after `on >PASSWORD`), as one command. The TLS/ACL tests run the console as exactly this user,
 * and the nodes' ACL LOG must stay empty.
 */
export const README_CONSOLE_ACL =
  "on resetkeys ~lock:* ~locks:* ~fence:* ~waitq:* ~waitqd:* ~waitqg:* ~lockscope:* ~lock.* ~mutex:* ~semaphore:* ~job-lock:* ~lock ~my_resource_name ~redisson_lock_queue:* ~redisson_lock_timeout:* " +
  "resetchannels &lockscope:* &__keyspace@0__:lock:* &__keyspace@0__:locks:* &__keyspace@0__:lock.* &__keyspace@0__:mutex:* &__keyspace@0__:semaphore:* &__keyspace@0__:job-lock:* &__keyspace@0__:lock &__keyspace@0__:my_resource_name &__keyspace@0__:redisson_lock_timeout:* &redisson_lock__channel:* &redisson_rwlock:* &__keyspace@0__:lockscope:probe:* " +
  "-@all +ping +info +time +scan +type +get +pttl +pexpire +exists +set +del +incr +incrby +hset +hgetall +hdel +multi +exec +eval +evalsha +xadd +xrevrange +publish +subscribe +psubscribe +unsubscribe +punsubscribe +quit" +
  " +hexists +hget +hlen +hscan +zscore +zcard +zrevrange +zrem +llen +lrange +strlen +getrange +zadd " +
  "+config|get +config|set +client|setname";

/** What the README adds to it on a Redis Cluster. */
export const README_CLUSTER_ACL = `${README_CONSOLE_ACL} +cluster|slots +cluster|shards +cluster|info +readonly +readwrite +spublish`;
