package remoting

// RequestCode names a request. The numbers are RocketMQ 4.x's (RequestCode.java);
// each comment gives the Java name so a grep finds both.
type RequestCode int32

// Request codes. Broker-bound, nameserver-bound and client-bound codes share one
// number space.
const (
	SendMessage                     RequestCode = 10  // SEND_MESSAGE
	PullMessage                     RequestCode = 11  // PULL_MESSAGE
	QueryMessage                    RequestCode = 12  // QUERY_MESSAGE
	QueryBrokerOffset               RequestCode = 13  // QUERY_BROKER_OFFSET
	QueryConsumerOffset             RequestCode = 14  // QUERY_CONSUMER_OFFSET
	UpdateConsumerOffset            RequestCode = 15  // UPDATE_CONSUMER_OFFSET
	UpdateAndCreateTopic            RequestCode = 17  // UPDATE_AND_CREATE_TOPIC
	GetAllTopicConfig               RequestCode = 21  // GET_ALL_TOPIC_CONFIG
	GetTopicConfigList              RequestCode = 22  // GET_TOPIC_CONFIG_LIST
	GetTopicNameList                RequestCode = 23  // GET_TOPIC_NAME_LIST
	UpdateBrokerConfig              RequestCode = 25  // UPDATE_BROKER_CONFIG
	GetBrokerConfig                 RequestCode = 26  // GET_BROKER_CONFIG
	TriggerDeleteFiles              RequestCode = 27  // TRIGGER_DELETE_FILES
	GetBrokerRuntimeInfo            RequestCode = 28  // GET_BROKER_RUNTIME_INFO
	SearchOffsetByTimestamp         RequestCode = 29  // SEARCH_OFFSET_BY_TIMESTAMP
	GetMaxOffset                    RequestCode = 30  // GET_MAX_OFFSET
	GetMinOffset                    RequestCode = 31  // GET_MIN_OFFSET
	GetEarliestMsgStoreTime         RequestCode = 32  // GET_EARLIEST_MSG_STORETIME
	ViewMessageByID                 RequestCode = 33  // VIEW_MESSAGE_BY_ID
	HeartBeat                       RequestCode = 34  // HEART_BEAT
	UnregisterClient                RequestCode = 35  // UNREGISTER_CLIENT
	ConsumerSendMsgBack             RequestCode = 36  // CONSUMER_SEND_MSG_BACK
	EndTransaction                  RequestCode = 37  // END_TRANSACTION
	GetConsumerListByGroup          RequestCode = 38  // GET_CONSUMER_LIST_BY_GROUP
	CheckTransactionState           RequestCode = 39  // CHECK_TRANSACTION_STATE
	NotifyConsumerIdsChanged        RequestCode = 40  // NOTIFY_CONSUMER_IDS_CHANGED
	LockBatchMQ                     RequestCode = 41  // LOCK_BATCH_MQ
	UnlockBatchMQ                   RequestCode = 42  // UNLOCK_BATCH_MQ
	GetAllConsumerOffset            RequestCode = 43  // GET_ALL_CONSUMER_OFFSET
	GetAllDelayOffset               RequestCode = 45  // GET_ALL_DELAY_OFFSET
	CheckClientConfig               RequestCode = 46  // CHECK_CLIENT_CONFIG
	UpdateAndCreateACLConfig        RequestCode = 50  // UPDATE_AND_CREATE_ACL_CONFIG
	DeleteACLConfig                 RequestCode = 51  // DELETE_ACL_CONFIG
	GetBrokerClusterACLInfo         RequestCode = 52  // GET_BROKER_CLUSTER_ACL_INFO
	UpdateGlobalWhiteAddrsConfig    RequestCode = 53  // UPDATE_GLOBAL_WHITE_ADDRS_CONFIG
	GetBrokerClusterACLConfig       RequestCode = 54  // GET_BROKER_CLUSTER_ACL_CONFIG
	PutKVConfig                     RequestCode = 100 // PUT_KV_CONFIG
	GetKVConfig                     RequestCode = 101 // GET_KV_CONFIG
	DeleteKVConfig                  RequestCode = 102 // DELETE_KV_CONFIG
	RegisterBroker                  RequestCode = 103 // REGISTER_BROKER
	UnregisterBroker                RequestCode = 104 // UNREGISTER_BROKER
	GetRouteInfoByTopic             RequestCode = 105 // GET_ROUTEINFO_BY_TOPIC
	GetBrokerClusterInfo            RequestCode = 106 // GET_BROKER_CLUSTER_INFO
	UpdateAndCreateSubscription     RequestCode = 200 // UPDATE_AND_CREATE_SUBSCRIPTIONGROUP
	GetAllSubscriptionGroupConfig   RequestCode = 201 // GET_ALL_SUBSCRIPTIONGROUP_CONFIG
	GetTopicStatsInfo               RequestCode = 202 // GET_TOPIC_STATS_INFO
	GetConsumerConnectionList       RequestCode = 203 // GET_CONSUMER_CONNECTION_LIST
	GetProducerConnectionList       RequestCode = 204 // GET_PRODUCER_CONNECTION_LIST
	WipeWritePermOfBroker           RequestCode = 205 // WIPE_WRITE_PERM_OF_BROKER
	GetAllTopicListFromNameServer   RequestCode = 206 // GET_ALL_TOPIC_LIST_FROM_NAMESERVER
	DeleteSubscriptionGroup         RequestCode = 207 // DELETE_SUBSCRIPTIONGROUP
	GetConsumeStats                 RequestCode = 208 // GET_CONSUME_STATS
	SuspendConsumer                 RequestCode = 209 // SUSPEND_CONSUMER
	ResumeConsumer                  RequestCode = 210 // RESUME_CONSUMER
	ResetConsumerOffsetInConsumer   RequestCode = 211 // RESET_CONSUMER_OFFSET_IN_CONSUMER
	ResetConsumerOffsetInBroker     RequestCode = 212 // RESET_CONSUMER_OFFSET_IN_BROKER
	AdjustConsumerThreadPool        RequestCode = 213 // ADJUST_CONSUMER_THREAD_POOL
	WhoConsumeTheMessage            RequestCode = 214 // WHO_CONSUME_THE_MESSAGE
	DeleteTopicInBroker             RequestCode = 215 // DELETE_TOPIC_IN_BROKER
	DeleteTopicInNamesrv            RequestCode = 216 // DELETE_TOPIC_IN_NAMESRV
	RegisterTopicInNamesrv          RequestCode = 217 // REGISTER_TOPIC_IN_NAMESRV
	GetKVListByNamespace            RequestCode = 219 // GET_KVLIST_BY_NAMESPACE
	ResetConsumerClientOffset       RequestCode = 220 // RESET_CONSUMER_CLIENT_OFFSET
	GetConsumerStatusFromClient     RequestCode = 221 // GET_CONSUMER_STATUS_FROM_CLIENT
	InvokeBrokerToResetOffset       RequestCode = 222 // INVOKE_BROKER_TO_RESET_OFFSET
	InvokeBrokerToGetConsumerStatus RequestCode = 223 // INVOKE_BROKER_TO_GET_CONSUMER_STATUS
	GetTopicsByCluster              RequestCode = 224 // GET_TOPICS_BY_CLUSTER
	QueryTopicConsumeByWho          RequestCode = 300 // QUERY_TOPIC_CONSUME_BY_WHO
	RegisterFilterServer            RequestCode = 301 // REGISTER_FILTER_SERVER
	QueryConsumeTimeSpan            RequestCode = 303 // QUERY_CONSUME_TIME_SPAN
	GetSystemTopicListFromNS        RequestCode = 304 // GET_SYSTEM_TOPIC_LIST_FROM_NS
	GetSystemTopicListFromBroker    RequestCode = 305 // GET_SYSTEM_TOPIC_LIST_FROM_BROKER
	CleanExpiredConsumeQueue        RequestCode = 306 // CLEAN_EXPIRED_CONSUMEQUEUE
	GetConsumerRunningInfo          RequestCode = 307 // GET_CONSUMER_RUNNING_INFO
	QueryCorrectionOffset           RequestCode = 308 // QUERY_CORRECTION_OFFSET
	ConsumeMessageDirectly          RequestCode = 309 // CONSUME_MESSAGE_DIRECTLY
	SendMessageV2                   RequestCode = 310 // SEND_MESSAGE_V2
	GetUnitTopicList                RequestCode = 311 // GET_UNIT_TOPIC_LIST
	GetHasUnitSubTopicList          RequestCode = 312 // GET_HAS_UNIT_SUB_TOPIC_LIST
	GetHasUnitSubUnunitTopicList    RequestCode = 313 // GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST
	CloneGroupOffset                RequestCode = 314 // CLONE_GROUP_OFFSET
	ViewBrokerStatsData             RequestCode = 315 // VIEW_BROKER_STATS_DATA
	CleanUnusedTopic                RequestCode = 316 // CLEAN_UNUSED_TOPIC
	GetBrokerConsumeStats           RequestCode = 317 // GET_BROKER_CONSUME_STATS
	UpdateNamesrvConfig             RequestCode = 318 // UPDATE_NAMESRV_CONFIG
	GetNamesrvConfig                RequestCode = 319 // GET_NAMESRV_CONFIG
	SendBatchMessage                RequestCode = 320 // SEND_BATCH_MESSAGE
	QueryConsumeQueue               RequestCode = 321 // QUERY_CONSUME_QUEUE
	QueryDataVersion                RequestCode = 322 // QUERY_DATA_VERSION
	ResumeCheckHalfMessage          RequestCode = 323 // RESUME_CHECK_HALF_MESSAGE
	SendReplyMessage                RequestCode = 324 // SEND_REPLY_MESSAGE
	SendReplyMessageV2              RequestCode = 325 // SEND_REPLY_MESSAGE_V2
	PushReplyMessageToClient        RequestCode = 326 // PUSH_REPLY_MESSAGE_TO_CLIENT
	AddWritePermOfBroker            RequestCode = 327 // ADD_WRITE_PERM_OF_BROKER
	QueryTopicsByConsumer           RequestCode = 343 // QUERY_TOPICS_BY_CONSUMER
	QuerySubscriptionByConsumer     RequestCode = 345 // QUERY_SUBSCRIPTION_BY_CONSUMER
	GetTopicConfig                  RequestCode = 351 // GET_TOPIC_CONFIG
	GetSubscriptionGroupConfig      RequestCode = 352 // GET_SUBSCRIPTIONGROUP_CONFIG
	GetBrokerHAStatus               RequestCode = 907 // GET_BROKER_HA_STATUS (RocketMQ 5)

	// Controller mode (RocketMQ 5's codes). A broker heartbeats to and
	// registers with the controller leader; tools read and change the
	// replica state there; the controller pushes role changes to brokers,
	// and a slave asks its new master for its epochs.
	BrokerHeartbeat             RequestCode = 904  // BROKER_HEARTBEAT
	ControllerAlterSyncStateSet RequestCode = 1001 // CONTROLLER_ALTER_SYNC_STATE_SET
	ControllerElectMaster       RequestCode = 1002 // CONTROLLER_ELECT_MASTER
	ControllerRegisterBroker    RequestCode = 1003 // CONTROLLER_REGISTER_BROKER
	ControllerGetReplicaInfo    RequestCode = 1004 // CONTROLLER_GET_REPLICA_INFO
	ControllerGetMetadataInfo   RequestCode = 1005 // CONTROLLER_GET_METADATA_INFO
	ControllerGetSyncStateData  RequestCode = 1006 // CONTROLLER_GET_SYNC_STATE_DATA
	GetBrokerEpochCache         RequestCode = 1007 // GET_BROKER_EPOCH_CACHE
	NotifyBrokerRoleChanged     RequestCode = 1008 // NOTIFY_BROKER_ROLE_CHANGED
)

// ResponseCode is the code of a response. RocketMQ's numbers
// (ResponseCode.java, RemotingSysResponseCode.java).
type ResponseCode int32

// Response codes.
const (
	Success                    ResponseCode = 0   // SUCCESS
	SystemError                ResponseCode = 1   // SYSTEM_ERROR
	SystemBusy                 ResponseCode = 2   // SYSTEM_BUSY
	RequestCodeNotSupported    ResponseCode = 3   // REQUEST_CODE_NOT_SUPPORTED
	TransactionFailed          ResponseCode = 4   // TRANSACTION_FAILED
	FlushDiskTimeout           ResponseCode = 10  // FLUSH_DISK_TIMEOUT
	SlaveNotAvailable          ResponseCode = 11  // SLAVE_NOT_AVAILABLE
	FlushSlaveTimeout          ResponseCode = 12  // FLUSH_SLAVE_TIMEOUT
	MessageIllegal             ResponseCode = 13  // MESSAGE_ILLEGAL
	ServiceNotAvailable        ResponseCode = 14  // SERVICE_NOT_AVAILABLE
	VersionNotSupported        ResponseCode = 15  // VERSION_NOT_SUPPORTED
	NoPermission               ResponseCode = 16  // NO_PERMISSION
	TopicNotExist              ResponseCode = 17  // TOPIC_NOT_EXIST
	TopicExistAlready          ResponseCode = 18  // TOPIC_EXIST_ALREADY
	PullNotFound               ResponseCode = 19  // PULL_NOT_FOUND
	PullRetryImmediately       ResponseCode = 20  // PULL_RETRY_IMMEDIATELY
	PullOffsetMoved            ResponseCode = 21  // PULL_OFFSET_MOVED
	QueryNotFound              ResponseCode = 22  // QUERY_NOT_FOUND
	SubscriptionParseFailed    ResponseCode = 23  // SUBSCRIPTION_PARSE_FAILED
	SubscriptionNotExist       ResponseCode = 24  // SUBSCRIPTION_NOT_EXIST
	SubscriptionNotLatest      ResponseCode = 25  // SUBSCRIPTION_NOT_LATEST
	SubscriptionGroupNotExist  ResponseCode = 26  // SUBSCRIPTION_GROUP_NOT_EXIST
	FilterDataNotExist         ResponseCode = 27  // FILTER_DATA_NOT_EXIST
	FilterDataNotLatest        ResponseCode = 28  // FILTER_DATA_NOT_LATEST
	TransactionShouldCommit    ResponseCode = 200 // TRANSACTION_SHOULD_COMMIT
	TransactionShouldRollback  ResponseCode = 201 // TRANSACTION_SHOULD_ROLLBACK
	TransactionStateUnknow     ResponseCode = 202 // TRANSACTION_STATE_UNKNOW
	TransactionStateGroupWrong ResponseCode = 203 // TRANSACTION_STATE_GROUP_WRONG
	NoBuyerID                  ResponseCode = 204 // NO_BUYER_ID
	NotInCurrentUnit           ResponseCode = 205 // NOT_IN_CURRENT_UNIT
	ConsumerNotOnline          ResponseCode = 206 // CONSUMER_NOT_ONLINE
	ConsumeMsgTimeout          ResponseCode = 207 // CONSUME_MSG_TIMEOUT
	NoMessage                  ResponseCode = 208 // NO_MESSAGE
	// UpdateAndCreateACLConfigFailed and the next two answer the ACL
	// administration requests that fail.
	UpdateAndCreateACLConfigFailed     ResponseCode = 209 // UPDATE_AND_CREATE_ACL_CONFIG_FAILED
	DeleteACLConfigFailed              ResponseCode = 210 // DELETE_ACL_CONFIG_FAILED
	UpdateGlobalWhiteAddrsConfigFailed ResponseCode = 211 // UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED
	FlowControl                        ResponseCode = 215 // FLOW_CONTROL

	// Controller answers (RocketMQ 5's codes).
	ControllerFencedMasterEpoch        ResponseCode = 2000 // CONTROLLER_FENCED_MASTER_EPOCH
	ControllerFencedSyncStateSetEpoch  ResponseCode = 2001 // CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH
	ControllerInvalidMaster            ResponseCode = 2002 // CONTROLLER_INVALID_MASTER
	ControllerInvalidReplicas          ResponseCode = 2003 // CONTROLLER_INVALID_REPLICAS
	ControllerMasterNotAvailable       ResponseCode = 2004 // CONTROLLER_MASTER_NOT_AVAILABLE
	ControllerInvalidRequest           ResponseCode = 2005 // CONTROLLER_INVALID_REQUEST
	ControllerBrokerNotAlive           ResponseCode = 2006 // CONTROLLER_BROKER_NOT_ALIVE
	ControllerNotLeader                ResponseCode = 2007 // CONTROLLER_NOT_LEADER
	ControllerBrokerMetadataNotExist   ResponseCode = 2008 // CONTROLLER_BROKER_METADATA_NOT_EXIST
	ControllerBrokerNeedToBeRegistered ResponseCode = 2010 // CONTROLLER_BROKER_NEED_TO_BE_REGISTERED
	ControllerMasterStillExist         ResponseCode = 2011 // CONTROLLER_MASTER_STILL_EXIST
	ControllerElectMasterFailed        ResponseCode = 2012 // CONTROLLER_ELECT_MASTER_FAILED
	ControllerAlterSyncStateSetFailed  ResponseCode = 2013 // CONTROLLER_ALTER_SYNC_STATE_SET_FAILED
)
